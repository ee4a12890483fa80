package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// The krew manifest format (krew.googlecontainertools.github.com/v1alpha2), re-declared
// here because the krew module is not available: only what krew reads.
const (
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	krewKind       = "Plugin"
	// pluginName is the name users install the plugin by: `kubectl krew install registry`.
	pluginName = "registry"
)

// Plugin is a krew plugin manifest.
type Plugin struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       PluginSpec        `json:"spec"`
}

// PluginSpec is the spec of a krew Plugin.
type PluginSpec struct {
	Version          string     `json:"version,omitempty"`
	ShortDescription string     `json:"shortDescription,omitempty"`
	Description      string     `json:"description,omitempty"`
	Caveats          string     `json:"caveats,omitempty"`
	Homepage         string     `json:"homepage,omitempty"`
	Platforms        []Platform `json:"platforms,omitempty"`
}

// Platform is one downloadable archive of a plugin and the os/arch it serves.
type Platform struct {
	URI      string                `json:"uri,omitempty"`
	Sha256   string                `json:"sha256,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	Files    []FileOperation       `json:"files"`
	Bin      string                `json:"bin,omitempty"`
}

// FileOperation copies the archive paths matching the glob From into the directory To
// of the installation.
type FileOperation struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

var (
	// safePluginName is krew's rule for plugin names (validation.IsSafePluginName).
	safePluginName = regexp.MustCompile(`^[\w-]+$`)
	// validSHA256 is krew's rule for sha256 values: lowercase hex only.
	validSHA256 = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// strictSemver is semver 2.0.0 (https://semver.org, the suggested regular expression)
	// with the leading "v" krew requires.
	strictSemver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
)

// osArch is an operating system and architecture as Go and krew name them.
type osArch struct{ OS, Arch string }

func (p osArch) String() string { return p.OS + "/" + p.Arch }

// key is the name of the platform in the template's maps: "linux_amd64".
func (p osArch) key() string { return p.OS + "_" + p.Arch }

// krewOSArchPairs are the os/arch pairs krew runs on (the list krew's
// validate-krew-manifest checks selectors against).
var krewOSArchPairs = []osArch{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"}, {"linux", "ppc64le"},
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
}

// validVersion reports whether v is a version krew accepts: a leading "v" and strict
// semver 2.0.0 (krew parses it with apimachinery's ParseSemantic, which must agree).
func validVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("version %q does not start with \"v\"", v)
	}
	if !strictSemver.MatchString(v) {
		return fmt.Errorf("version %q is not strict semver (vMAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", v)
	}
	if _, err := utilversion.ParseSemantic(v); err != nil {
		return fmt.Errorf("version %q: %w", v, err)
	}
	return nil
}

// krewVersion returns v when krew accepts it, else a valid development version that keeps
// v as build metadata ("v1.2" -> "v0.0.0-dev+v1.2"), and whether it had to change it.
func krewVersion(v string) (string, bool) {
	if validVersion(v) == nil {
		return v, false
	}
	var ids []string
	for _, id := range strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '+' }) {
		id = strings.Map(func(r rune) rune {
			if r == '-' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') {
				return r
			}
			return '-'
		}, id)
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "v0.0.0-dev", true
	}
	return "v0.0.0-dev+" + strings.Join(ids, "."), true
}

// TemplateData fills the placeholders of .krew.yaml. The maps are keyed by platform,
// "linux_amd64": {{ .URI.linux_amd64 }}.
type TemplateData struct {
	Version string
	URI     map[string]string
	SHA256  map[string]string
}

// renderManifest executes the manifest template; a placeholder without a value is an error.
func renderManifest(tmpl []byte, data TemplateData) ([]byte, error) {
	t, err := template.New("krew manifest").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("parsing the manifest template: %w", err)
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("rendering the manifest template: %w", err)
	}
	return out.Bytes(), nil
}

// parsePlugin decodes a manifest strictly: unknown fields are errors, as a typo would
// otherwise silently drop a setting.
func parsePlugin(data []byte) (*Plugin, error) {
	var p Plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decoding the krew manifest: %w", err)
	}
	return &p, nil
}

// ValidationError lists every rule a manifest breaks.
type ValidationError struct{ Problems []string }

func (e *ValidationError) Error() string {
	return "invalid krew manifest:\n  " + strings.Join(e.Problems, "\n  ")
}

// problems returns the problems of err when it is a *ValidationError, else its message.
func problems(err error) []string {
	if err == nil {
		return nil
	}
	if ve := (*ValidationError)(nil); errors.As(err, &ve) {
		return ve.Problems
	}
	return []string{err.Error()}
}

// validatePlugin checks p against krew's rules for a manifest of the plugin name (the
// index file name without .yaml). It reports every problem, not only the first.
func validatePlugin(p *Plugin, name string) error {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	if p.APIVersion != krewAPIVersion {
		add("apiVersion is %q, want %q", p.APIVersion, krewAPIVersion)
	}
	if p.Kind != krewKind {
		add("kind is %q, want %q", p.Kind, krewKind)
	}
	switch {
	case !safePluginName.MatchString(p.Metadata.Name):
		add("metadata.name %q is not allowed, must match %s", p.Metadata.Name, safePluginName)
	case p.Metadata.Name != name:
		add("metadata.name is %q, the plugin is named %q", p.Metadata.Name, name)
	}
	switch {
	case p.Spec.ShortDescription == "":
		add("spec.shortDescription is missing")
	case strings.ContainsAny(p.Spec.ShortDescription, "\r\n"):
		add("spec.shortDescription has line breaks, it must be one line")
	}
	if p.Spec.Version == "" {
		add("spec.version is missing")
	} else if err := validVersion(p.Spec.Version); err != nil {
		add("spec.version: %v", err)
	}
	if len(p.Spec.Platforms) == 0 {
		add("spec.platforms is empty, a plugin needs at least one platform")
	}
	for i, pl := range p.Spec.Platforms {
		for _, msg := range validatePlatform(pl) {
			add("spec.platforms[%d]: %s", i, msg)
		}
	}
	probs = append(probs, validateCoverage(p.Spec.Platforms)...)
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

// validatePlatform checks the fields of one platform.
func validatePlatform(p Platform) []string {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if p.URI == "" {
		add("uri is missing")
	}
	switch {
	case p.Sha256 == "":
		add("sha256 is missing")
	case !validSHA256.MatchString(p.Sha256):
		add("sha256 %q is not valid, must match %s", p.Sha256, validSHA256)
	}
	if p.Bin == "" {
		add("bin is missing")
	}
	if p.Files != nil && len(p.Files) == 0 {
		add("files is empty: leave it out or list the files to install")
	}
	for i, f := range p.Files {
		if f.From == "" {
			add("files[%d].from is missing", i)
		}
		if f.To == "" {
			add("files[%d].to is missing", i)
		}
	}
	switch sel := p.Selector; {
	case sel == nil:
		add("selector is missing (a nil selector is not supported)")
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0:
		add("selector is empty (an empty selector is not supported)")
	default:
		keys := make([]string, 0, len(sel.MatchLabels)+len(sel.MatchExpressions))
		for k := range sel.MatchLabels {
			keys = append(keys, k)
		}
		for _, e := range sel.MatchExpressions {
			keys = append(keys, e.Key)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if k != "os" && k != "arch" {
				add("selector key %q is not supported, only \"os\" and \"arch\" are", k)
			}
		}
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			add("selector: %v", err)
		}
	}
	return probs
}

// validateCoverage checks that every platform's selector matches a pair krew runs on and
// that no pair is matched by two platforms (krew would pick either).
func validateCoverage(platforms []Platform) []string {
	var probs []string
	matchedBy := map[osArch][]int{}
	for i, p := range platforms {
		if p.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil || sel.Empty() {
			continue // reported by validatePlatform
		}
		any := false
		for _, pair := range krewOSArchPairs {
			if sel.Matches(labels.Set{"os": pair.OS, "arch": pair.Arch}) {
				any = true
				matchedBy[pair] = append(matchedBy[pair], i)
			}
		}
		if !any {
			probs = append(probs, fmt.Sprintf("spec.platforms[%d]: selector %s matches no os/arch krew supports", i, sel))
		}
	}
	for _, pair := range krewOSArchPairs {
		if idx := matchedBy[pair]; len(idx) > 1 {
			probs = append(probs, fmt.Sprintf("%s is matched by more than one platform: spec.platforms%v", pair, idx))
		}
	}
	return probs
}

// platformFor returns the index of the platform whose selector matches pair, or -1.
func (p *Plugin) platformFor(pair osArch) int {
	for i, pl := range p.Spec.Platforms {
		if pl.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pl.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set{"os": pair.OS, "arch": pair.Arch}) {
			return i
		}
	}
	return -1
}

// readPlugin reads and decodes a manifest file.
func readPlugin(path string) (*Plugin, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := parsePlugin(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
