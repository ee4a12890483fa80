package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imagePlatforms are the platforms of the controller image `make image-index` and
// `make image-push` build by default: the nodes clusters run on.
var imagePlatforms = []osArch{{"linux", "amd64"}, {"linux", "arm64"}}

// elfMachines is the ELF machine of a binary Go builds for each GOARCH an image may be for.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkBinary checks that path is what an image FROM scratch for linux/arch can run: a
// linux ELF executable for arch's machine, statically linked (no program interpreter:
// the image has no libc and no loader).
func checkBinary(path, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q: no image is built for it", arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a linux executable: %w", path, err)
	}
	defer func() { _ = f.Close() }() // read only: nothing to flush
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not for %s (%s): build it with GOOS=linux GOARCH=%s", path, f.Machine, arch, want, arch)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked, and the image has no loader nor libc: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// indexOptions are the inputs of buildIndex.
type indexOptions struct {
	// BinDir holds the static binaries: BinDir/linux_<arch>/kubectl-registry, as make
	// dist and make image-index build them.
	BinDir string
	// Platforms are the image's platforms, linux only.
	Platforms []osArch
	// Version labels every image (org.opencontainers.image.version) and the index.
	Version string
}

// buildIndex assembles the multi-platform controller image: an OCI image index holding
// one image per platform (assembleImage), each described by its platform so that a node
// pulls its own.
func buildIndex(o indexOptions) (v1.ImageIndex, error) {
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platforms")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		if p.OS != "linux" {
			return nil, fmt.Errorf("platform %s: the controller image runs on linux only", p)
		}
		img, err := assembleImage(binaryPath(o.BinDir, p), p.Arch, o.Version)
		if err != nil {
			return nil, fmt.Errorf("the image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch},
			},
		})
	}
	return mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.title":   binaryName,
		"org.opencontainers.image.source":  imageSource,
		"org.opencontainers.image.version": o.Version,
	}).(v1.ImageIndex), nil
}

// writeIndex builds the index and writes it to dir as an OCI image layout (dir is
// replaced): what `registry-dist push`, `crane push --index` and `skopeo copy oci:` read.
func writeIndex(o indexOptions, dir string, log io.Writer) error {
	idx, err := buildIndex(o)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s: the controller image %s for %s (%s)\n", dir, o.Version, platformList(o.Platforms), digest)
	return nil
}

// readIndex reads the image index of the OCI layout dir (writeIndex's).
func readIndex(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	// layout.Write makes the index written the layout's own (index.json).
	m, err := root.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("the OCI layout %s holds no image", dir)
	}
	return root, nil
}

// pushOptions are the inputs of pushIndex.
type pushOptions struct {
	// Layout is the OCI layout writeIndex wrote.
	Layout string
	// Images are the names to push the index to, each repository:tag.
	Images []string
	// Keychain authenticates to the registries; nil means authn.DefaultKeychain (the
	// credentials of `docker login`, in ~/.docker/config.json or a credential helper).
	Keychain authn.Keychain
	// Insecure allows registries served over plain HTTP (a local registry).
	Insecure bool
	// Options are more options of the pushes (tests pass a transport).
	Options []remote.Option
}

// pushIndex pushes the multi-platform image of the layout to every name of o.Images,
// checking each platform's binary first, and prints each name with the index's digest.
func pushIndex(o pushOptions, log io.Writer) error {
	if len(o.Images) == 0 {
		return errors.New("no image to push to: name one or more, e.g. registry.example.com/team/kubectl-registry:v0.2.0")
	}
	refs := make([]name.Tag, len(o.Images))
	for i, image := range o.Images {
		if strings.Contains(image, "@") {
			return fmt.Errorf("image %q: push to a tag, not a digest", image)
		}
		nameOpts := []name.Option{name.StrictValidation}
		if o.Insecure {
			nameOpts = append(nameOpts, name.Insecure)
		}
		tag, err := name.NewTag(image, nameOpts...)
		if err != nil {
			return fmt.Errorf("image %q: %w (want <registry>/<repository>:<tag>)", image, err)
		}
		refs[i] = tag
	}
	idx, err := readIndex(o.Layout)
	if err != nil {
		return err
	}
	if err := checkIndex(idx); err != nil {
		return fmt.Errorf("the OCI layout %s: %w", o.Layout, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	keychain := o.Keychain
	if keychain == nil {
		keychain = authn.DefaultKeychain
	}
	for _, ref := range refs {
		opts := append([]remote.Option{remote.WithAuthFromKeychain(keychain)}, o.Options...)
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Fprintf(log, "pushed %s@%s\n", ref, digest)
	}
	return nil
}

// checkIndex checks that every image of idx is a linux image whose platform in the
// index is its config's, holding the binary for that platform's machine.
func checkIndex(idx v1.ImageIndex) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) == 0 {
		return errors.New("the image index holds no image")
	}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("image %s has no platform in the index", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			return fmt.Errorf("image %s is listed for %s/%s but its config says %s/%s", d.Digest, d.Platform.OS, d.Platform.Architecture, cf.OS, cf.Architecture)
		}
		if err := checkImageBinary(img, d.Platform.Architecture); err != nil {
			return fmt.Errorf("image %s for %s/%s: %w", d.Digest, d.Platform.OS, d.Platform.Architecture, err)
		}
	}
	return nil
}

// checkImageBinary checks the binary of a controller image (its one layer) with
// checkBinary.
func checkImageBinary(img v1.Image, arch string) error {
	dir, err := os.MkdirTemp("", "registry-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, binaryName)
	if err := extractFile(img, binaryName, path); err != nil {
		return err
	}
	return checkBinary(path, arch)
}

// extractFile writes the file name of img's file system to path.
func extractFile(img v1.Image, name, path string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the image holds no %s", name)
		}
		if err != nil {
			return fmt.Errorf("reading the image's files: %w", err)
		}
		if strings.TrimPrefix(hdr.Name, "/") != name || hdr.Typeflag != tar.TypeReg {
			continue
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			_ = f.Close() // the copy's error is the one to report
			return err
		}
		return f.Close()
	}
}

// releaseVersion matches the versions make release tags: vX.Y.Z, or a pre-release
// vX.Y.Z-alpha.N, -beta.N, -rc.N (not a development or git describe version).
var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-(alpha|beta|rc)\.\d+)?$`)

// checkReleaseImage refuses to package a release whose binaries would deploy another
// release's controller: `kubectl registry install`, the chart and the kustomize base
// deploy the manifests' default image, whose tag must be the release's version (make
// release sets it). Development versions are not checked.
func checkReleaseImage(version, defaultImage string) error {
	if !releaseVersion.MatchString(version) {
		return nil
	}
	if i := strings.LastIndex(defaultImage, ":"); i >= 0 && defaultImage[i+1:] == version {
		return nil
	}
	return fmt.Errorf("release %s: the manifests' default image is %s, so its install, chart and kustomize base would deploy another version's controller: cut releases with make release VERSION=%s (it sets the image's tag)", version, defaultImage, version)
}
