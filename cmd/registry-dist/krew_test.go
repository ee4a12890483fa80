package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// templatePath is the krew manifest template of the repository.
const templatePath = "../../.krew.yaml"

// dummyData fills every placeholder of the template for platforms with values that name
// their platform, so that a platform wired to another platform's archive shows.
func dummyData(version string, platforms []osArch) TemplateData {
	d := TemplateData{Version: version, URI: map[string]string{}, SHA256: map[string]string{}}
	for _, p := range platforms {
		d.URI[p.key()] = "https://example.com/download/" + archiveName(version, p)
		sum := sha256.Sum256([]byte(p.key()))
		d.SHA256[p.key()] = hex.EncodeToString(sum[:])
	}
	return d
}

// TestTemplateIsValid renders .krew.yaml with dummy values and checks it against krew's
// rules, and that each dist platform gets its own archive, checksum and binary.
func TestTemplateIsValid(t *testing.T) {
	tmpl, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	data := dummyData("v1.2.3", distPlatforms)
	rendered, err := renderManifest(tmpl, data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parsePlugin(rendered)
	if err != nil {
		t.Fatal(err)
	}
	if err := validatePlugin(p, pluginName); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Version != "v1.2.3" {
		t.Errorf("version %q, want the rendered v1.2.3", p.Spec.Version)
	}
	if !strings.Contains(p.Spec.Caveats, "kubectl registry install") {
		t.Errorf("caveats do not say how to install the controller:\n%s", p.Spec.Caveats)
	}
	if !strings.Contains(p.Spec.Caveats, completionName) {
		t.Errorf("caveats do not say how to put %s on PATH:\n%s", completionName, p.Spec.Caveats)
	}
	if p.Spec.Description == "" || p.Spec.Homepage == "" {
		t.Errorf("description %q, homepage %q: both are wanted", p.Spec.Description, p.Spec.Homepage)
	}
	if len(p.Spec.Platforms) != len(distPlatforms) {
		t.Errorf("%d platforms, want one per dist platform (%d)", len(p.Spec.Platforms), len(distPlatforms))
	}
	for _, pair := range distPlatforms {
		i := p.platformFor(pair)
		if i < 0 {
			t.Errorf("no platform for %s", pair)
			continue
		}
		got := p.Spec.Platforms[i]
		want := Platform{
			URI:      data.URI[pair.key()],
			Sha256:   data.SHA256[pair.key()],
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": pair.OS, "arch": pair.Arch}},
			Bin:      exeName(pair.OS),
			Files:    []FileOperation{{From: exeName(pair.OS), To: "."}, {From: completionExeName(pair.OS), To: "."}, {From: "LICENSE", To: "."}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("platform %s (-want +got):\n%s", pair, diff)
		}
	}

	// sha256 values are quoted in the template, so that a value of digits alone stays a string.
	for _, line := range strings.Split(string(tmpl), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "sha256:") && !strings.HasPrefix(l, `sha256: "`) {
			t.Errorf("unquoted sha256 in the template: %s", l)
		}
	}
}

// TestTemplateNeedsEveryPlaceholder: a platform without a built archive fails the render
// instead of leaving "<no value>" in the manifest.
func TestTemplateNeedsEveryPlaceholder(t *testing.T) {
	tmpl, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = renderManifest(tmpl, dummyData("v1.2.3", distPlatforms[:2]))
	if err == nil || !strings.Contains(err.Error(), "map has no entry for key") {
		t.Errorf("rendering without the darwin and windows values: got %v, want a missing key error", err)
	}
}

// validPlugin returns a manifest krew accepts, for the table tests to break.
func validPlugin() *Plugin {
	platform := func(goos, arch string) Platform {
		return Platform{
			URI:      "https://example.com/" + goos + "_" + arch + ".tar.gz",
			Sha256:   strings.Repeat("ab", 32),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": goos, "arch": arch}},
			Files:    []FileOperation{{From: exeName(goos), To: "."}, {From: "LICENSE", To: "."}},
			Bin:      exeName(goos),
		}
	}
	return &Plugin{
		APIVersion: krewAPIVersion,
		Kind:       krewKind,
		Metadata:   metav1.ObjectMeta{Name: pluginName},
		Spec: PluginSpec{
			Version:          "v0.1.0",
			ShortDescription: "one line",
			Platforms:        []Platform{platform("linux", "amd64"), platform("darwin", "arm64"), platform("windows", "amd64")},
		},
	}
}

func TestValidatePlugin(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *Plugin)
		want   []string
	}{
		{name: "valid", mutate: func(*Plugin) {}},
		{name: "valid without files", mutate: func(p *Plugin) { p.Spec.Platforms[0].Files = nil }},
		{name: "valid dev version with build metadata", mutate: func(p *Plugin) { p.Spec.Version = "v0.1.0-dev+23ac910d6350" }},
		{name: "valid git describe version", mutate: func(p *Plugin) { p.Spec.Version = "v0.1.0-3-g23ac910d6350-dirty" }},
		{name: "valid selector by expression", mutate: func(p *Plugin) {
			p.Spec.Platforms[0].Selector = &metav1.LabelSelector{
				MatchLabels:      map[string]string{"os": "linux"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "arch", Operator: metav1.LabelSelectorOpIn, Values: []string{"amd64"}}},
			}
		}},
		{
			name: "apiVersion and kind",
			mutate: func(p *Plugin) {
				p.APIVersion = "krew.googlecontainertools.github.com/v1alpha1"
				p.Kind = "plugin"
			},
			want: []string{
				`apiVersion is "krew.googlecontainertools.github.com/v1alpha1", want "krew.googlecontainertools.github.com/v1alpha2"`,
				`kind is "plugin", want "Plugin"`,
			},
		},
		{
			name:   "unsafe name",
			mutate: func(p *Plugin) { p.Metadata.Name = "../registry" },
			want:   []string{`metadata.name "../registry" is not allowed, must match ^[\w-]+$`},
		},
		{
			name:   "name is not the plugin's",
			mutate: func(p *Plugin) { p.Metadata.Name = "cluster-registry" },
			want:   []string{`metadata.name is "cluster-registry", the plugin is named "registry"`},
		},
		{
			name:   "no short description",
			mutate: func(p *Plugin) { p.Spec.ShortDescription = "" },
			want:   []string{"spec.shortDescription is missing"},
		},
		{
			name:   "multi-line short description",
			mutate: func(p *Plugin) { p.Spec.ShortDescription = "one\ntwo" },
			want:   []string{"spec.shortDescription has line breaks, it must be one line"},
		},
		{
			name:   "no version",
			mutate: func(p *Plugin) { p.Spec.Version = "" },
			want:   []string{"spec.version is missing"},
		},
		{
			name:   "version without v",
			mutate: func(p *Plugin) { p.Spec.Version = "0.1.0" },
			want:   []string{`spec.version: version "0.1.0" does not start with "v"`},
		},
		{
			name:   "version without patch",
			mutate: func(p *Plugin) { p.Spec.Version = "v0.1" },
			want:   []string{`spec.version: version "v0.1" is not strict semver (vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])`},
		},
		{
			name:   "version with a leading zero",
			mutate: func(p *Plugin) { p.Spec.Version = "v0.01.0" },
			want:   []string{`spec.version: version "v0.01.0" is not strict semver (vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])`},
		},
		{
			name:   "no platforms",
			mutate: func(p *Plugin) { p.Spec.Platforms = nil },
			want:   []string{"spec.platforms is empty, a plugin needs at least one platform"},
		},
		{
			name: "platform without uri, sha256 and bin",
			mutate: func(p *Plugin) {
				p.Spec.Platforms[1].URI, p.Spec.Platforms[1].Sha256, p.Spec.Platforms[1].Bin = "", "", ""
			},
			want: []string{
				"spec.platforms[1]: uri is missing",
				"spec.platforms[1]: sha256 is missing",
				"spec.platforms[1]: bin is missing",
			},
		},
		{
			name:   "uppercase sha256",
			mutate: func(p *Plugin) { p.Spec.Platforms[0].Sha256 = strings.Repeat("AB", 32) },
			want:   []string{`spec.platforms[0]: sha256 "` + strings.Repeat("AB", 32) + `" is not valid, must match ^[a-f0-9]{64}$`},
		},
		{
			name:   "short sha256",
			mutate: func(p *Plugin) { p.Spec.Platforms[0].Sha256 = "abc" },
			want:   []string{`spec.platforms[0]: sha256 "abc" is not valid, must match ^[a-f0-9]{64}$`},
		},
		{
			name:   "empty files",
			mutate: func(p *Plugin) { p.Spec.Platforms[2].Files = []FileOperation{} },
			want:   []string{"spec.platforms[2]: files is empty: leave it out or list the files to install"},
		},
		{
			name:   "file without from and to",
			mutate: func(p *Plugin) { p.Spec.Platforms[2].Files = append(p.Spec.Platforms[2].Files, FileOperation{}) },
			want: []string{
				"spec.platforms[2]: files[2].from is missing",
				"spec.platforms[2]: files[2].to is missing",
			},
		},
		{
			name:   "nil selector",
			mutate: func(p *Plugin) { p.Spec.Platforms[0].Selector = nil },
			want:   []string{"spec.platforms[0]: selector is missing (a nil selector is not supported)"},
		},
		{
			name:   "empty selector",
			mutate: func(p *Plugin) { p.Spec.Platforms[0].Selector = &metav1.LabelSelector{} },
			want:   []string{"spec.platforms[0]: selector is empty (an empty selector is not supported)"},
		},
		{
			name: "unsupported selector keys",
			mutate: func(p *Plugin) {
				p.Spec.Platforms[0].Selector.MatchLabels["distro"] = "debian"
				p.Spec.Platforms[0].Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "libc", Operator: metav1.LabelSelectorOpExists}}
			},
			want: []string{
				`spec.platforms[0]: selector key "distro" is not supported, only "os" and "arch" are`,
				`spec.platforms[0]: selector key "libc" is not supported, only "os" and "arch" are`,
				// With unknown keys the selector matches no os/arch pair krew knows.
				"spec.platforms[0]: selector arch=amd64,distro=debian,libc,os=linux matches no os/arch krew supports",
			},
		},
		{
			name:   "selector of an os krew does not run on",
			mutate: func(p *Plugin) { p.Spec.Platforms[0].Selector.MatchLabels["os"] = "plan9" },
			want:   []string{"spec.platforms[0]: selector arch=amd64,os=plan9 matches no os/arch krew supports"},
		},
		{
			name: "two platforms for linux/amd64",
			mutate: func(p *Plugin) {
				p.Spec.Platforms[1].Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"os": "linux"}}
			},
			want: []string{"linux/amd64 is matched by more than one platform: spec.platforms[0 1]"},
		},
		{
			name: "everything at once is reported at once",
			mutate: func(p *Plugin) {
				p.Kind = ""
				p.Spec.Version = "latest"
				p.Spec.Platforms[2].Bin = ""
			},
			want: []string{
				`kind is "", want "Plugin"`,
				`spec.version: version "latest" does not start with "v"`,
				"spec.platforms[2]: bin is missing",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPlugin()
			tt.mutate(p)
			got := problems(validatePlugin(p, pluginName))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParsePluginIsStrict: a misspelt field is an error, not a silently dropped setting.
func TestParsePluginIsStrict(t *testing.T) {
	_, err := parsePlugin([]byte("apiVersion: x\nkind: Plugin\nspec:\n  shortDescripton: typo\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "shortDescripton"`) {
		t.Errorf("got %v, want an unknown field error", err)
	}
}

func TestKrewVersion(t *testing.T) {
	tests := []struct {
		in, want string
		changed  bool
	}{
		{"v0.1.0", "v0.1.0", false},
		{"v1.2.3-rc.1", "v1.2.3-rc.1", false},
		{"v0.1.0-dev+23ac910d6350", "v0.1.0-dev+23ac910d6350", false}, // the Makefile's dev version
		{"v0.1.0-3-g23ac910d6350-dirty", "v0.1.0-3-g23ac910d6350-dirty", false},
		{"v0.1", "v0.0.0-dev+v0.1", true},
		{"0.1.0", "v0.0.0-dev+0.1.0", true},
		{"v1.2.3+a+b", "v0.0.0-dev+v1.2.3.a.b", true},
		{"release/2026 #5", "v0.0.0-dev+release-2026--5", true},
		{"", "v0.0.0-dev", true},
	}
	for _, tt := range tests {
		got, changed := krewVersion(tt.in)
		if got != tt.want || changed != tt.changed {
			t.Errorf("krewVersion(%q) = %q, %v; want %q, %v", tt.in, got, changed, tt.want, tt.changed)
		}
		if err := validVersion(got); err != nil {
			t.Errorf("krewVersion(%q) = %q, which krew rejects: %v", tt.in, got, err)
		}
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := parsePlatforms(" linux/amd64,darwin/arm64  windows/amd64\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []osArch{{"linux", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "linux", "linux/amd64 linux/amd64", "linux/arm/v7", "/amd64"} {
		if _, err := parsePlatforms(bad); err == nil {
			t.Errorf("parsePlatforms(%q) succeeded, want an error", bad)
		}
	}
}
