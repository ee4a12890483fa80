package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Files written into the dist directory besides the archives.
const (
	checksumsName = "checksums.txt"
	manifestName  = pluginName + ".yaml"
)

// distPlatforms are the platforms `make dist` builds by default.
var distPlatforms = []osArch{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"},
}

// parsePlatforms parses "linux/amd64 darwin/arm64 ..." (spaces or commas).
func parsePlatforms(s string) ([]osArch, error) {
	var out []osArch
	seen := map[osArch]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		goos, arch, ok := strings.Cut(f, "/")
		if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q is not os/arch", f)
		}
		p := osArch{goos, arch}
		if seen[p] {
			return nil, fmt.Errorf("platform %s is listed twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no platforms")
	}
	return out, nil
}

// packageOptions are the inputs of packageDist.
type packageOptions struct {
	// Version is the version the binaries were built with; the manifest and the archive
	// names use krewVersion(Version).
	Version string
	// BinDir holds the binaries: BinDir/<os>_<arch>/kubectl-registry[.exe] and
	// BinDir/<os>_<arch>/kubectl_complete-registry[.exe].
	BinDir string
	// OutDir receives the archives, checksums.txt and registry.yaml.
	OutDir string
	// License is the license file put into every archive.
	License string
	// Template is the krew manifest template (.krew.yaml).
	Template string
	// BaseURL is where the archives are published: a platform's uri is BaseURL/<archive>.
	BaseURL   string
	Platforms []osArch
	// Chart, when set, is the Helm chart's directory (manifests/helm/kubectl-registry):
	// its archive, stamped with the version, goes next to the krew manifest.
	Chart string
	// Kustomize and Monitoring, when set, are the kustomize base (manifests/kustomize)
	// and the monitoring pack (manifests/monitoring), archived together.
	Kustomize, Monitoring string
}

// binaryPath returns where packageDist expects the binary of p.
func binaryPath(binDir string, p osArch) string {
	return filepath.Join(binDir, p.key(), exeName(p.OS))
}

// completionPath returns where packageDist expects the completion executable of p.
func completionPath(binDir string, p osArch) string {
	return filepath.Join(binDir, p.key(), completionExeName(p.OS))
}

// packageDist writes an archive per platform (the binary, the completion executable and
// the license), their checksums and the krew manifest rendered for them, which it
// validates (with the archives) before writing it.
func packageDist(o packageOptions, log io.Writer) error {
	if o.BaseURL == "" {
		return errors.New("a base URL is required")
	}
	if _, err := url.Parse(o.BaseURL); err != nil {
		return fmt.Errorf("base URL: %w", err)
	}
	version, changed := krewVersion(o.Version)
	if changed {
		fmt.Fprintf(log, "warning: version %q is not strict semver with a leading v, as krew requires; the manifest and archives use %q\n", o.Version, version)
	}
	license, err := os.ReadFile(o.License)
	if err != nil {
		return fmt.Errorf("reading the license: %w", err)
	}
	tmpl, err := os.ReadFile(o.Template)
	if err != nil {
		return fmt.Errorf("reading the manifest template: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return err
	}

	data := TemplateData{Version: version, URI: map[string]string{}, SHA256: map[string]string{}}
	sums := map[string]string{}
	for _, p := range o.Platforms {
		name, archive, err := writePlatformArchive(o, version, p, license)
		if err != nil {
			return err
		}
		sum, err := sha256File(archive)
		if err != nil {
			return err
		}
		sums[name] = sum
		data.URI[p.key()] = strings.TrimSuffix(o.BaseURL, "/") + "/" + name
		data.SHA256[p.key()] = sum
		fmt.Fprintf(log, "%s  %s\n", sum, archive)
	}
	if err := packageInstallers(o, version, sums, log); err != nil {
		return err
	}
	checksums := filepath.Join(o.OutDir, checksumsName)
	if err := os.WriteFile(checksums, checksumsFile(sums), 0o644); err != nil {
		return err
	}

	rendered, err := renderManifest(tmpl, data)
	if err != nil {
		return err
	}
	plugin, err := parsePlugin(rendered)
	if err != nil {
		return err
	}
	if err := validatePlugin(plugin, pluginName); err != nil {
		return err
	}
	if probs := validateDist(plugin, o.OutDir, o.Platforms); len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	manifest := filepath.Join(o.OutDir, manifestName)
	if err := os.WriteFile(manifest, rendered, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s and %s (version %s)\n", checksums, manifest, version)
	return nil
}

// writePlatformArchive writes the archive of platform p into o.OutDir: the binary and
// the completion executable of p from o.BinDir, and the license. It returns the
// archive's name and path.
func writePlatformArchive(o packageOptions, version string, p osArch, license []byte) (name, archive string, err error) {
	bin, err := os.ReadFile(binaryPath(o.BinDir, p))
	if err != nil {
		return "", "", fmt.Errorf("the %s binary: %w", p, err)
	}
	comp, err := os.ReadFile(completionPath(o.BinDir, p))
	if err != nil {
		return "", "", fmt.Errorf("the %s completion executable: %w", p, err)
	}
	name = archiveName(version, p)
	archive = filepath.Join(o.OutDir, name)
	err = writeArchive(archive, []archiveEntry{
		{Name: exeName(p.OS), Mode: 0o755, Data: bin},
		{Name: completionExeName(p.OS), Mode: 0o755, Data: comp},
		{Name: "LICENSE", Mode: 0o644, Data: license},
	})
	if err != nil {
		return "", "", err
	}
	return name, archive, nil
}

// packageInstallers writes the chart's archive and the kustomize archive that o asks for
// and adds their checksums to sums.
func packageInstallers(o packageOptions, version string, sums map[string]string, log io.Writer) error {
	if (o.Kustomize == "") != (o.Monitoring == "") {
		return errors.New("the kustomize base and the monitoring pack go together: give both or neither")
	}
	var archives []string
	if o.Chart != "" {
		archive, err := packageChart(o.Chart, version, o.OutDir)
		if err != nil {
			return fmt.Errorf("packaging the Helm chart: %w", err)
		}
		archives = append(archives, archive)
	}
	if o.Kustomize != "" {
		archive, err := packageKustomize(o.Kustomize, o.Monitoring, version, o.OutDir)
		if err != nil {
			return fmt.Errorf("packaging the kustomize base: %w", err)
		}
		archives = append(archives, archive)
	}
	for _, archive := range archives {
		sum, err := sha256File(archive)
		if err != nil {
			return err
		}
		sums[filepath.Base(archive)] = sum
		fmt.Fprintf(log, "%s  %s\n", sum, archive)
	}
	return nil
}

// validateDist checks a (valid) manifest against the archives in dir: every platform's
// archive (the last element of its uri) is in dir with the manifest's sha256, which
// checksums.txt lists too, and installs the bin, the completion executable and a license; each of want has its
// platform and archive.
func validateDist(p *Plugin, dir string, want []osArch) []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	sums := map[string]string{}
	if data, err := os.ReadFile(filepath.Join(dir, checksumsName)); err != nil {
		add("%v", err)
	} else if sums, err = parseChecksums(data); err != nil {
		add("%s: %v", checksumsName, err)
	}
	for i, pl := range p.Spec.Platforms {
		u, err := url.Parse(pl.URI)
		if err != nil {
			add("spec.platforms[%d]: uri: %v", i, err)
			continue
		}
		name := path.Base(u.Path)
		archive := filepath.Join(dir, name)
		sum, err := sha256File(archive)
		if err != nil {
			add("spec.platforms[%d]: %v", i, err)
			continue
		}
		if sum != pl.Sha256 {
			add("spec.platforms[%d]: sha256 %s, but %s has %s", i, pl.Sha256, name, sum)
		}
		if listed, ok := sums[name]; !ok {
			add("%s does not list %s", checksumsName, name)
		} else if listed != sum {
			add("%s lists %s for %s, the file has %s", checksumsName, listed, name, sum)
		}
		goos := ""
		if pl.Selector != nil {
			goos = pl.Selector.MatchLabels["os"]
		}
		for _, msg := range append(checkArchive(archive, pl, goos), checkCompletion(archive, pl, goos)...) {
			add("spec.platforms[%d]: %s", i, msg)
		}
	}
	for _, pair := range want {
		i := p.platformFor(pair)
		if i < 0 {
			add("no platform for %s", pair)
			continue
		}
		pl := p.Spec.Platforms[i]
		if name := archiveName(p.Spec.Version, pair); !strings.HasSuffix(pl.URI, "/"+name) {
			add("spec.platforms[%d] (%s): uri %q is not the %s archive %s", i, pair, pl.URI, pair, name)
		}
		if bin := exeName(pair.OS); pl.Bin != bin {
			add("spec.platforms[%d] (%s): bin is %q, want %q", i, pair, pl.Bin, bin)
		}
	}
	return probs
}
