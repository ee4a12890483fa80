package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeFakeArchive writes entries as an archive named name in dir and returns its path.
func writeFakeArchive(t *testing.T, dir, name string, entries ...archiveEntry) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := writeArchive(path, entries); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestArchiveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	entries := []archiveEntry{
		{Name: "kubectl-registry", Mode: 0o755, Data: []byte("binary")},
		{Name: "LICENSE", Mode: 0o644, Data: []byte("license")},
	}
	for _, name := range []string{"a.tar.gz", "a.zip"} {
		got, err := readArchive(writeFakeArchive(t, dir, name, entries...))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(entries, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	// Reproducible: the same input gives the same bytes.
	a := writeFakeArchive(t, dir, "b.tar.gz", entries...)
	first, _ := os.ReadFile(a)
	a = writeFakeArchive(t, dir, "b.tar.gz", entries...)
	second, _ := os.ReadFile(a)
	if !bytes.Equal(first, second) {
		t.Error("writing the same archive twice gave different bytes")
	}
}

func TestCheckArchive(t *testing.T) {
	dir := t.TempDir()
	bin := archiveEntry{Name: "kubectl-registry", Mode: 0o755, Data: []byte("binary")}
	license := archiveEntry{Name: "LICENSE", Mode: 0o644, Data: []byte("license")}
	std := []FileOperation{{From: "kubectl-registry", To: "."}, {From: "LICENSE", To: "."}}
	tests := []struct {
		name    string
		archive string
		entries []archiveEntry
		goos    string
		files   []FileOperation
		bin     string
		want    []string
	}{
		{name: "tar.gz", archive: "ok.tar.gz", entries: []archiveEntry{bin, license}, goos: "linux", files: std, bin: "kubectl-registry"},
		{
			name: "zip for windows", archive: "ok.zip", goos: "windows", bin: "kubectl-registry.exe",
			entries: []archiveEntry{{Name: "kubectl-registry.exe", Mode: 0o644, Data: []byte("exe")}, license},
			files:   []FileOperation{{From: "*.exe", To: "."}, {From: "LICENSE", To: "."}},
		},
		{name: "no files installs everything", archive: "all.tar.gz", entries: []archiveEntry{bin, license}, goos: "linux", bin: "kubectl-registry"},
		{
			name: "a directory glob installs its files", archive: "dir.tar.gz", goos: "darwin", bin: "kubectl-registry-1/kubectl-registry",
			entries: []archiveEntry{{Name: "kubectl-registry-1/kubectl-registry", Mode: 0o755}, {Name: "kubectl-registry-1/LICENSE.txt"}},
			files:   []FileOperation{{From: "kubectl-registry-*", To: "."}},
		},
		{
			name: "to a subdirectory", archive: "sub.tar.gz", goos: "linux", bin: "bin/kubectl-registry",
			entries: []archiveEntry{bin, license},
			files:   []FileOperation{{From: "kubectl-registry", To: "bin"}, {From: "LICENSE", To: "."}},
		},
		{
			name: "no license in the archive", archive: "nolicense.tar.gz", goos: "linux", bin: "kubectl-registry",
			entries: []archiveEntry{bin}, files: std,
			want: []string{"nolicense.tar.gz: no license file (LICENSE*, COPYING*) is installed from the archive"},
		},
		{
			name: "license not installed", archive: "licensenotcopied.tar.gz", goos: "linux", bin: "kubectl-registry",
			entries: []archiveEntry{bin, license}, files: std[:1],
			want: []string{"licensenotcopied.tar.gz: no license file (LICENSE*, COPYING*) is installed from the archive"},
		},
		{
			name: "bin missing", archive: "nobin.tar.gz", goos: "linux", bin: "kubectl-registry",
			entries: []archiveEntry{license}, files: std,
			want: []string{`nobin.tar.gz: bin "kubectl-registry" is not installed from the archive (installed: LICENSE)`},
		},
		{
			name: "bin not executable", archive: "noexec.tar.gz", goos: "linux", bin: "kubectl-registry",
			entries: []archiveEntry{{Name: "kubectl-registry", Mode: 0o644}, license}, files: std,
			want: []string{`noexec.tar.gz: bin "kubectl-registry" is not executable (mode -rw-r--r--)`},
		},
		{
			name: "bin with the wrong name for windows", archive: "win.zip", goos: "windows", bin: "kubectl-registry.exe",
			entries: []archiveEntry{bin, license}, files: std,
			want: []string{`win.zip: bin "kubectl-registry.exe" is not installed from the archive (installed: LICENSE, kubectl-registry)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFakeArchive(t, dir, tt.archive, tt.entries...)
			got := checkArchive(path, Platform{Bin: tt.bin, Files: tt.files}, tt.goos)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("not an archive", func(t *testing.T) {
		path := filepath.Join(dir, "plain.tar.gz")
		if err := os.WriteFile(path, []byte("plain text"), 0o644); err != nil {
			t.Fatal(err)
		}
		want := []string{path + " is neither a zip nor a gzip-compressed tar archive"}
		if diff := cmp.Diff(want, checkArchive(path, Platform{Bin: "x"}, "linux")); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// fakeDist runs packageDist over fake binaries with the repository's template and license.
func fakeDist(t *testing.T, version string) (packageOptions, *Plugin) {
	t.Helper()
	dir := t.TempDir()
	o := packageOptions{
		Version:    version,
		BinDir:     filepath.Join(dir, "bin"),
		OutDir:     filepath.Join(dir, "dist"),
		License:    "../../LICENSE",
		Template:   templatePath,
		BaseURL:    "https://example.com/releases/download/" + version + "/",
		Platforms:  distPlatforms,
		Chart:      chartDir,
		Kustomize:  kustomizeDir,
		Monitoring: monitoringDir,
	}
	for _, p := range distPlatforms {
		path := binaryPath(o.BinDir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("fake "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(completionPath(o.BinDir, p), []byte("fake completion "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	if err := packageDist(o, &log); err != nil {
		t.Fatalf("packageDist: %v\n%s", err, log.String())
	}
	p, err := readPlugin(filepath.Join(o.OutDir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	return o, p
}

func TestPackageDist(t *testing.T) {
	o, p := fakeDist(t, "v0.2.0")
	if err := validatePlugin(p, pluginName); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), validateDist(p, o.OutDir, distPlatforms)); diff != "" {
		t.Errorf("validateDist (-want +got):\n%s", diff)
	}
	var names []string
	entries, _ := os.ReadDir(o.OutDir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{
		"checksums.txt",
		"kubectl-registry-0.2.0.tgz",
		"kubectl-registry-kustomize_v0.2.0.tar.gz",
		"kubectl-registry_v0.2.0_darwin_amd64.tar.gz",
		"kubectl-registry_v0.2.0_darwin_arm64.tar.gz",
		"kubectl-registry_v0.2.0_linux_amd64.tar.gz",
		"kubectl-registry_v0.2.0_linux_arm64.tar.gz",
		"kubectl-registry_v0.2.0_windows_amd64.zip",
		"registry.yaml",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("dist files (-want +got):\n%s", diff)
	}
	if i := p.platformFor(osArch{"linux", "arm64"}); i < 0 ||
		p.Spec.Platforms[i].URI != "https://example.com/releases/download/v0.2.0/kubectl-registry_v0.2.0_linux_arm64.tar.gz" {
		t.Errorf("linux/arm64 platform %d: %+v", i, p.Spec.Platforms)
	}
	// Each archive holds its own platform's binary.
	got, err := readArchive(filepath.Join(o.OutDir, "kubectl-registry_v0.2.0_windows_amd64.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "kubectl-registry.exe" || string(got[0].Data) != "fake windows/amd64" ||
		got[1].Name != "kubectl_complete-registry.exe" || string(got[1].Data) != "fake completion windows/amd64" || got[2].Name != "LICENSE" {
		t.Errorf("windows archive holds %+v", got)
	}
	// checksums.txt is in sha256sum's format.
	sums, err := os.ReadFile(filepath.Join(o.OutDir, checksumsName))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		if s, err := sha256File(filepath.Join(o.OutDir, name)); err != nil || s != sum {
			t.Errorf("checksums.txt line %q: file has %s (%v)", line, s, err)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--check", "--strict", checksumsName)
		cmd.Dir = o.OutDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum --check: %v\n%s", err, out)
		}
	}
	// The chart and the kustomize base are published next to the manifest.
	for _, name := range []string{chartArchiveName("v0.2.0"), kustomizeArchiveName("v0.2.0")} {
		if !strings.Contains(string(sums), "  "+name+"\n") {
			t.Errorf("checksums.txt does not list %s:\n%s", name, sums)
		}
	}
	checkChartArchive(t, filepath.Join(o.OutDir, chartArchiveName("v0.2.0")), "v0.2.0")
	checkKustomizeArchive(t, filepath.Join(o.OutDir, kustomizeArchiveName("v0.2.0")))
}

// TestPackageDistFixesTheVersion: a version krew rejects still gives a valid manifest.
func TestPackageDistFixesTheVersion(t *testing.T) {
	_, p := fakeDist(t, "v0.3")
	if p.Spec.Version != "v0.0.0-dev+v0.3" {
		t.Errorf("version %q, want v0.0.0-dev+v0.3", p.Spec.Version)
	}
	if err := validatePlugin(p, pluginName); err != nil {
		t.Error(err)
	}
}

// TestValidateDistFindsTampering: the manifest's sums must be the archives' and
// checksums.txt's.
func TestValidateDistFindsTampering(t *testing.T) {
	o, p := fakeDist(t, "v0.2.0")
	archive := "kubectl-registry_v0.2.0_darwin_arm64.tar.gz"
	i := p.platformFor(osArch{"darwin", "arm64"})
	old := p.Spec.Platforms[i].Sha256
	if err := writeArchive(filepath.Join(o.OutDir, archive), []archiveEntry{{Name: "kubectl-registry", Mode: 0o755}}); err != nil {
		t.Fatal(err)
	}
	now, err := sha256File(filepath.Join(o.OutDir, archive))
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Platforms[0].Bin = "kubectl-registry.exe" // linux/amd64 with a windows binary name
	want := []string{
		"spec.platforms[0]: " + `kubectl-registry_v0.2.0_linux_amd64.tar.gz: bin "kubectl-registry.exe" is not installed from the archive (installed: LICENSE, kubectl-registry, kubectl_complete-registry)`,
		"spec.platforms[3]: sha256 " + old + ", but " + archive + " has " + now,
		"checksums.txt lists " + old + " for " + archive + ", the file has " + now,
		"spec.platforms[3]: " + archive + ": no license file (LICENSE*, COPYING*) is installed from the archive",
		"spec.platforms[3]: " + archive + `: the completion executable "kubectl_complete-registry" is not installed from the archive`,
		`spec.platforms[0] (linux/amd64): bin is "kubectl-registry.exe", want "kubectl-registry"`,
		"no platform for linux/ppc64le",
	}
	got := validateDist(p, o.OutDir, append(append([]osArch(nil), distPlatforms...), osArch{"linux", "ppc64le"}))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestRealDist validates what `make dist` wrote into dist/: the manifest against krew's
// rules and its archives, and that the archive for this machine unpacks to a binary that
// runs `version`. It skips when there is no dist/ (run `make dist`).
func TestRealDist(t *testing.T) {
	dir := "../../dist"
	manifest := filepath.Join(dir, manifestName)
	if _, err := os.Stat(manifest); err != nil {
		t.Skipf("no %s: run `make dist` to validate its output", manifest)
	}
	p, err := readPlugin(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validatePlugin(p, pluginName); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string(nil), validateDist(p, dir, distPlatforms)); diff != "" {
		t.Errorf("validateDist (-want +got):\n%s", diff)
	}
	checkChartArchive(t, filepath.Join(dir, chartArchiveName(p.Spec.Version)), p.Spec.Version)
	checkKustomizeArchive(t, filepath.Join(dir, kustomizeArchiveName(p.Spec.Version)))

	host := osArch{runtime.GOOS, runtime.GOARCH}
	i := p.platformFor(host)
	if i < 0 {
		t.Skipf("no archive for %s", host)
	}
	pl := p.Spec.Platforms[i]
	entries, err := readArchive(filepath.Join(dir, archiveName(p.Spec.Version, host)))
	if err != nil {
		t.Fatal(err)
	}
	bin, ok := installedFiles(entries, pl.Files)[pl.Bin]
	if !ok {
		t.Fatalf("%s is not in the archive", pl.Bin)
	}
	path := filepath.Join(t.TempDir(), pl.Bin)
	if err := os.WriteFile(path, bin.Data, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(path, "version")
	cmd.Stdout, cmd.Stderr = &out, io.Discard
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s version: %v\n%s", pl.Bin, err, out.String())
	}
	// The binary carries the version it was built with; the manifest has the same one
	// unless it had to be made krew-valid (then it keeps it as build metadata).
	built := p.Spec.Version
	if meta, ok := strings.CutPrefix(built, "v0.0.0-dev+"); ok {
		built = meta
	}
	if !strings.Contains(out.String(), built) {
		t.Errorf("%s version printed %q, want it to name %s", pl.Bin, out.String(), built)
	}
}
