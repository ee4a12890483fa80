// Command registry-dist does the packaging steps of a release, which the Makefile runs
// after `go build`:
//
//	registry-dist package   archives per platform (binary + LICENSE), checksums.txt and the
//	                        krew manifest rendered from .krew.yaml (dist/registry.yaml),
//	                        validated against krew's rules and the archives; with --chart
//	                        the Helm chart as <chart>-<version>.tgz, with --kustomize the
//	                        kustomize base and monitoring pack as one archive
//	registry-dist image     the controller image as a tarball `docker load` reads, from the
//	                        static linux binary, without Docker
//	registry-dist image-index
//	                        the controller image for several platforms (linux/amd64 and
//	                        linux/arm64) as one OCI image index, in an OCI image layout
//	registry-dist push      pushes the image index of such a layout to registry names,
//	                        with the credentials of `docker login`, without Docker
//	registry-dist validate  checks a krew manifest (and, with --dist, its archives)
//	registry-dist krew-version VERSION
//	                        prints the version the manifest gets for VERSION
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "registry-dist:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  registry-dist package --version V --bin-dir DIR --out DIR --license FILE --template FILE --base-url URL [--platforms "os/arch ..."]
                        [--chart DIR] [--kustomize DIR --monitoring DIR]
  registry-dist image --binary FILE --output FILE [--arch ARCH] [--version V] [--tag IMAGE]
  registry-dist image-index --bin-dir DIR --output DIR [--platforms "linux/amd64 linux/arm64"] [--version V]
  registry-dist push --layout DIR [--insecure] IMAGE...
  registry-dist validate [--name registry] [--dist DIR] MANIFEST
  registry-dist krew-version VERSION`

// run runs the registry-dist command args[0] with the flags and arguments after it.
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("registry-dist "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch cmd {
	case "package":
		return packageCmd(fs, args, stderr)
	case "image":
		return imageCmd(fs, args, stderr)
	case "image-index":
		return imageIndexCmd(fs, args, stderr)
	case "push":
		return pushCmd(fs, args, stdout)
	case "validate":
		return validateCmd(fs, args, stdout)
	case "krew-version":
		return krewVersionCmd(fs, args, stdout)
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

// packageCmd runs registry-dist package: it checks the release image, then writes the
// archives, checksums, krew manifest and installers (progress to stderr).
func packageCmd(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	var o packageOptions
	platforms := fs.String("platforms", platformList(distPlatforms), "platforms to package, os/arch separated by spaces or commas")
	fs.StringVar(&o.Version, "version", "", "version the binaries were built with")
	fs.StringVar(&o.BinDir, "bin-dir", "", "directory of the binaries: <bin-dir>/<os>_<arch>/kubectl-registry[.exe]")
	fs.StringVar(&o.OutDir, "out", "dist", "output directory")
	fs.StringVar(&o.License, "license", "LICENSE", "license file put into every archive")
	fs.StringVar(&o.Template, "template", ".krew.yaml", "krew manifest template")
	fs.StringVar(&o.BaseURL, "base-url", "", "URL the archives are published under (uri = base-url/archive)")
	fs.StringVar(&o.Chart, "chart", "", "Helm chart directory to package next to the manifest (optional)")
	fs.StringVar(&o.Kustomize, "kustomize", "", "kustomize base directory to archive with --monitoring (optional)")
	fs.StringVar(&o.Monitoring, "monitoring", "", "monitoring pack directory archived with --kustomize")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if o.Version == "" || o.BinDir == "" {
		return errors.New("package: --version and --bin-dir are required")
	}
	var err error
	if o.Platforms, err = parsePlatforms(*platforms); err != nil {
		return fmt.Errorf("--platforms: %w", err)
	}
	if err := checkReleaseImage(o.Version, manifests.DefaultImage); err != nil {
		return err
	}
	return packageDist(o, stderr)
}

// imageCmd runs registry-dist image: it writes the controller image of one
// architecture as a tarball (progress to stderr).
func imageCmd(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	var o imageOptions
	output := fs.String("output", "", "image tarball to write")
	fs.StringVar(&o.Binary, "binary", "", "static kubectl-registry built for linux/<arch>")
	fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the binary (GOARCH)")
	fs.StringVar(&o.Version, "version", "", "version label of the image")
	fs.StringVar(&o.Tag, "tag", "", "image name (default the manifests' default image)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if o.Binary == "" || *output == "" {
		return errors.New("image: --binary and --output are required")
	}
	return writeImage(o, *output, stderr)
}

// imageIndexCmd runs registry-dist image-index: it writes the controller image of every
// platform as an OCI image layout (progress to stderr).
func imageIndexCmd(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	var o indexOptions
	output := fs.String("output", "", "OCI image layout directory to write (replaced)")
	platforms := fs.String("platforms", platformList(imagePlatforms), "the image's platforms, linux/arch separated by spaces or commas")
	fs.StringVar(&o.BinDir, "bin-dir", "", "directory of the static binaries: <bin-dir>/linux_<arch>/kubectl-registry")
	fs.StringVar(&o.Version, "version", "", "version label of the images")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if o.BinDir == "" || *output == "" {
		return errors.New("image-index: --bin-dir and --output are required")
	}
	var err error
	if o.Platforms, err = parsePlatforms(*platforms); err != nil {
		return fmt.Errorf("--platforms: %w", err)
	}
	return writeIndex(o, *output, stderr)
}

// pushCmd runs registry-dist push: it pushes an OCI image layout to every image name
// given (progress to stdout).
func pushCmd(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var o pushOptions
	fs.StringVar(&o.Layout, "layout", "", "OCI image layout written by image-index")
	fs.BoolVar(&o.Insecure, "insecure", false, "allow registries served over plain HTTP")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Layout == "" {
		return errors.New("push: --layout is required")
	}
	o.Images = fs.Args()
	return pushIndex(o, stdout)
}

// validateCmd runs registry-dist validate: it checks a krew manifest, and with --dist
// the archives it names, and says so on stdout.
func validateCmd(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	name := fs.String("name", pluginName, "plugin name the manifest must have (krew: its file name)")
	dist := fs.String("dist", "", "directory of the archives and checksums.txt to check the manifest against")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	p, err := readPlugin(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := validatePlugin(p, *name); err != nil {
		return err
	}
	if *dist != "" {
		if probs := validateDist(p, *dist, nil); len(probs) > 0 {
			return &ValidationError{Problems: probs}
		}
	}
	fmt.Fprintf(stdout, "%s: valid krew manifest of %s %s (%d platforms)\n", fs.Arg(0), p.Metadata.Name, p.Spec.Version, len(p.Spec.Platforms))
	return nil
}

// krewVersionCmd runs registry-dist krew-version: it prints the version krew accepts
// for a version (krewVersion).
func krewVersionCmd(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	v, _ := krewVersion(fs.Arg(0))
	fmt.Fprintln(stdout, v)
	return nil
}

// parse parses flags and requires exactly nargs arguments.
func parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != nargs {
		return fmt.Errorf("%s: want %d argument(s), got %d\n%s", fs.Name(), nargs, fs.NArg(), usage)
	}
	return nil
}

func platformList(ps []osArch) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}
