package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/manifests"
)

// Where the generated files go, relative to the manifests directory.
const (
	// ChartName is the Helm chart's name.
	ChartName = "kubectl-registry"
	// chartDir holds the chart.
	chartDir = "helm/" + ChartName
	// kustomizeDir holds the kustomize base.
	kustomizeDir = "kustomize"
	// monitoringSource is the template file of the monitoring pack.
	monitoringSource = "monitoring.yaml"
)

// The sentinels are the values the generator renders the manifests with, so that it finds
// in the output every place a knob of install reaches and puts a template expression
// there: whatever manifests.Render does with a knob, the chart does too.
const (
	sentinelNamespace   = "zzgennamespacezz"
	sentinelClusterName = "zzgenclusternamezz"
	sentinelEndpoint    = "https://zzgenendpointzz"
	sentinelImage       = "zzgenimagezz"
	sentinelReplicas    = 7919
)

// knob is what replaces a sentinel in a template.
type knob struct {
	sentinel string
	// expr is the template expression of its value.
	expr string
	// cond, when not empty, is the condition under which a line holding the sentinel is
	// rendered (a flag passed only when set, as install passes it).
	cond string
}

// knobs are the string knobs, longest sentinel first.
var knobs = []knob{
	{sentinel: sentinelEndpoint, expr: `(include "kubectl-registry.apiServerEndpoint" .)`, cond: ".Values.apiServerEndpoint"},
	{sentinel: sentinelClusterName, expr: ".Values.clusterName", cond: ".Values.clusterName"},
	{sentinel: sentinelNamespace, expr: ".Release.Namespace"},
	{sentinel: sentinelImage, expr: `(include "kubectl-registry.image" .)`},
}

// Generate returns every file of the chart and of the kustomize base, by their paths
// relative to the manifests directory (slash-separated).
func Generate() (map[string][]byte, error) {
	files := map[string][]byte{}
	if err := generateChart(files); err != nil {
		return nil, fmt.Errorf("generating the Helm chart: %w", err)
	}
	if err := generateKustomize(files); err != nil {
		return nil, fmt.Errorf("generating the kustomize base: %w", err)
	}
	return files, nil
}

// source is a manifest file of package manifests and the objects rendered from it, in
// order.
type source struct {
	name string
	objs []*unstructured.Unstructured
}

// isCRD reports whether obj is a CustomResourceDefinition.
func isCRD(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "CustomResourceDefinition"
}

// bySource renders the manifests with opts and groups the objects by the embedded file
// they come from (crds/<file> for the CRDs), in apply order; the monitoring pack is
// monitoringSource. monitoring reports which objects are the pack's.
func bySource(opts manifests.RenderOptions) (sources []*source, monitoring map[*unstructured.Unstructured]bool, err error) {
	origin, err := originFiles()
	if err != nil {
		return nil, nil, err
	}
	plain, err := manifests.Objects()
	if err != nil {
		return nil, nil, err
	}
	rendered, err := manifests.Render(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering the manifests: %w", err)
	}
	if want := len(plain); len(rendered) < want {
		return nil, nil, fmt.Errorf("rendering gave %d objects, the manifests hold %d", len(rendered), want)
	}
	// Render keeps the objects of manifests.Objects in their order (and renames some):
	// the i-th rendered object is the i-th embedded one, then comes the monitoring pack.
	monitoring = map[*unstructured.Unstructured]bool{}
	index := map[string]*source{}
	for i, obj := range rendered {
		name := monitoringSource
		if i < len(plain) {
			var ok bool
			if name, ok = origin[objectKey(plain[i])]; !ok {
				return nil, nil, fmt.Errorf("%s %s is in no embedded manifest file", plain[i].GetKind(), plain[i].GetName())
			}
		} else {
			monitoring[obj] = true
		}
		s := index[name]
		if s == nil {
			s = &source{name: name}
			index[name] = s
			sources = append(sources, s)
		}
		s.objs = append(s.objs, obj)
	}
	return sources, monitoring, nil
}

// objectKey identifies an embedded object.
func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetAPIVersion() + "/" + obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// originFiles maps every embedded object to the file holding it.
func originFiles() (map[string]string, error) {
	origin := map[string]string{}
	err := fs.WalkDir(manifests.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(name) != ".yaml" {
			return err
		}
		data, err := fs.ReadFile(manifests.FS(), name)
		if err != nil {
			return err
		}
		objs, err := manifests.Decode(data)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", name, err)
		}
		for _, obj := range objs {
			if prev, dup := origin[objectKey(obj)]; dup {
				return fmt.Errorf("%s %s is in both %s and %s", obj.GetKind(), obj.GetName(), prev, name)
			}
			origin[objectKey(obj)] = name
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded manifests: %w", err)
	}
	return origin, nil
}

// generateChart adds the chart's files.
func generateChart(files map[string][]byte) error {
	sources, monitoring, err := bySource(manifests.RenderOptions{
		Namespace:         sentinelNamespace,
		ClusterName:       sentinelClusterName,
		APIServerEndpoint: sentinelEndpoint,
		Image:             sentinelImage,
		Replicas:          sentinelReplicas,
		Monitoring:        true,
	})
	if err != nil {
		return err
	}
	replicas := 0
	for _, s := range sources {
		var docs []string
		for _, obj := range s.objs {
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			if isCRD(obj) {
				// Helm applies crds/ as they are, untemplated.
				if sentinel := findSentinel(string(data)); sentinel != "" {
					return fmt.Errorf("CRD %s depends on an install option (%s): Helm does not template crds/", obj.GetName(), sentinel)
				}
				docs = append(docs, string(data))
				continue
			}
			doc, n, err := templateDoc(string(data))
			if err != nil {
				return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			replicas += n
			switch {
			case monitoring[obj]:
				doc = "{{- if .Values.monitoring.enabled }}\n" + doc + "{{- end }}\n"
			case manifests.IsMembersGrant(obj):
				doc = fmt.Sprintf("{{- if eq .Values.memberGrants %q }}\n", manifests.MemberGrantsAll) + doc + "{{- end }}\n"
			case obj.GetKind() == "Namespace" && obj.GetName() == sentinelNamespace:
				doc = "{{- if .Values.createNamespace }}\n" + doc + "{{- end }}\n"
			}
			docs = append(docs, doc)
		}
		if isCRD(s.objs[0]) {
			files[path.Join(chartDir, s.name)] = []byte(yamlHeader(s.name) + strings.Join(docs, "---\n"))
			continue
		}
		header := fmt.Sprintf("{{- /*\n%s*/ -}}\n", generatedBy(s.name))
		files[path.Join(chartDir, "templates", s.name)] = []byte(header + strings.Join(docs, "---\n"))
	}
	if replicas != 1 {
		return fmt.Errorf("the replicas of the controller appear %d times in the manifests, want once", replicas)
	}
	static, err := chartFiles()
	if err != nil {
		return err
	}
	for name, data := range static {
		files[path.Join(chartDir, name)] = data
	}
	return nil
}

// generateKustomize adds the kustomize base: the manifests rendered with install's
// defaults, and a kustomization.yaml listing them in apply order.
func generateKustomize(files map[string][]byte) error {
	sources, _, err := bySource(manifests.RenderOptions{})
	if err != nil {
		return err
	}
	var resources []string
	var grants []*unstructured.Unstructured
	for _, s := range sources {
		var docs []string
		for _, obj := range s.objs {
			if manifests.IsMembersGrant(obj) {
				grants = append(grants, obj)
			}
			data, err := yaml.Marshal(obj.Object)
			if err != nil {
				return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
			docs = append(docs, string(data))
		}
		files[path.Join(kustomizeDir, s.name)] = []byte(yamlHeader(s.name) + strings.Join(docs, "---\n"))
		resources = append(resources, s.name)
	}
	var k strings.Builder
	k.WriteString(yamlHeader("") + kustomizationDoc)
	k.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		k.WriteString("- " + r + "\n")
	}
	files[path.Join(kustomizeDir, "kustomization.yaml")] = []byte(k.String())
	if len(grants) > 0 {
		files[path.Join(kustomizeDir, noMemberGrantsComponent, "kustomization.yaml")] = noMemberGrants(grants)
	}
	return nil
}

// noMemberGrantsComponent is the kustomize component of install --member-grants=none.
const noMemberGrantsComponent = "components/no-member-grants"

// noMemberGrants returns the component that deletes the members' default grant from the
// base, as install --member-grants=none leaves it out.
func noMemberGrants(grants []*unstructured.Unstructured) []byte {
	var b strings.Builder
	b.WriteString(yamlHeader("") + `#
# install --member-grants=none: the members' identities are bound to nothing here, so each
# member writes only what a RoleBinding of this cluster grants its identity. Add it to an
# overlay of the base:
#   components:
#   - https://github.com/kubectl-registry/kubectl-registry//manifests/kustomize/` + noMemberGrantsComponent + `?ref=<tag>
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
`)
	for _, obj := range grants {
		fmt.Fprintf(&b, "- patch: |-\n    $patch: delete\n    apiVersion: %s\n    kind: %s\n    metadata:\n      name: %s\n",
			obj.GetAPIVersion(), obj.GetKind(), obj.GetName())
		if ns := obj.GetNamespace(); ns != "" {
			fmt.Fprintf(&b, "      namespace: %s\n", ns)
		}
	}
	return []byte(b.String())
}

// kustomizationDoc explains the base in its kustomization.yaml.
const kustomizationDoc = `#
# The kustomize base of kubectl-registry: the objects "kubectl registry install" applies
# with its defaults (registry namespace cluster-registry, no cluster name, no API server
# endpoint, the default image, one replica, no monitoring pack). Use it as a remote base:
#   resources:
#   - https://github.com/kubectl-registry/kubectl-registry//manifests/kustomize?ref=<tag>
# and set the knobs of install in your overlay (docs/install.md shows how): images: for
# --image, replicas: for --replicas, a patch of the Deployment's args for --cluster-name
# and --api-server-endpoint, ../monitoring for --monitoring, the component
# components/no-member-grants for --member-grants=none. The registry namespace is fixed
# here; to install into another one, use the Helm chart or install.
`

// generatedBy is the notice at the top of every generated file made from source.
func generatedBy(source string) string {
	from := ""
	if source != "" {
		from = " from manifests/" + source
	}
	return "Code generated by go run ./manifests/gen (make charts)" + from + ". DO NOT EDIT.\n"
}

// yamlHeader is generatedBy as a YAML comment.
func yamlHeader(source string) string { return "# " + generatedBy(source) }

// findSentinel returns the first sentinel in s, or "".
func findSentinel(s string) string {
	for _, k := range knobs {
		if strings.Contains(s, k.sentinel) {
			return k.sentinel
		}
	}
	if strings.Contains(s, strconv.Itoa(sentinelReplicas)) {
		return strconv.Itoa(sentinelReplicas)
	}
	return ""
}

// replicasLine is the Deployment's replicas as sigs.k8s.io/yaml writes them.
var replicasLine = regexp.MustCompile(`^(\s*replicas: )` + strconv.Itoa(sentinelReplicas) + `$`)

// scalarLine splits a line of block YAML into its prefix (indentation, "- ", "key: ") and
// its scalar value.
var scalarLine = regexp.MustCompile(`^(\s*(?:- )*(?:[A-Za-z0-9_./-]+: )?)(.*)$`)

// templateDoc turns one object's YAML into a template: template delimiters in the
// manifests are escaped, every sentinel becomes its expression and the lines of a
// conditional knob are rendered only when it is set. It returns how many times the
// replicas sentinel was replaced.
func templateDoc(doc string) (string, int, error) {
	escape := strings.NewReplacer("{{", `{{ "{{" }}`, "}}", `{{ "}}" }}`)
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	replicas := 0
	for _, line := range lines {
		body := strings.TrimSuffix(line, "\n")
		if m := replicasLine.FindStringSubmatch(body); m != nil {
			out.WriteString(m[1] + "{{ .Values.replicas | int }}\n")
			replicas++
			continue
		}
		if findSentinel(body) == "" {
			out.WriteString(escape.Replace(line))
			continue
		}
		m := scalarLine.FindStringSubmatch(body)
		prefix, value := m[1], m[2]
		if value == "" || strings.ContainsAny(value[:1], `'"|>{[&*!`) {
			return "", 0, fmt.Errorf("cannot template the line %q: the knob is not in a plain scalar", body)
		}
		// The value as a concatenation of literals and knob expressions, quoted.
		var parts, conds []string
		rest := value
		for rest != "" {
			at, k := len(rest), knob{}
			for _, kk := range knobs {
				if i := strings.Index(rest, kk.sentinel); i >= 0 && i < at {
					at, k = i, kk
				}
			}
			if at > 0 {
				parts = append(parts, strconv.Quote(rest[:at]))
			}
			if k.sentinel == "" {
				break
			}
			parts = append(parts, k.expr)
			if k.cond != "" && !slices.Contains(conds, k.cond) {
				conds = append(conds, k.cond)
			}
			rest = rest[at+len(k.sentinel):]
		}
		if findSentinel(strings.Join(parts, "")) != "" {
			return "", 0, fmt.Errorf("the line %q holds a sentinel the generator cannot replace", body)
		}
		expr := parts[0]
		if len(parts) > 1 {
			expr = "print " + strings.Join(parts, " ")
		}
		templated := prefix + "{{ " + expr + " | quote }}\n"
		if len(conds) > 0 {
			templated = "{{- if and " + strings.Join(conds, " ") + " }}\n" + templated + "{{- end }}\n"
			if len(conds) == 1 {
				templated = strings.Replace(templated, "if and ", "if ", 1)
			}
		}
		out.WriteString(templated)
	}
	return out.String(), replicas, nil
}

// Write writes files under dir (the manifests directory) and removes the files of the
// generated directories it no longer produces.
func Write(dir string, files map[string][]byte) error {
	for _, sub := range []string{chartDir, kustomizeDir} {
		root := filepath.Join(dir, filepath.FromSlash(sub))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipDir
			}
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				return os.Remove(p)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("removing stale generated files: %w", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, files[name]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// Diff compares files with what is under dir: the files that are missing, differ or are
// no longer generated, one description each.
func Diff(dir string, files map[string][]byte) ([]string, error) {
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		old, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			diffs = append(diffs, name+" is missing")
		case err != nil:
			return nil, err
		case !bytes.Equal(old, files[name]):
			diffs = append(diffs, name+" differs")
		}
	}
	for _, sub := range []string{chartDir, kustomizeDir} {
		root := filepath.Join(dir, filepath.FromSlash(sub))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			if _, ok := files[filepath.ToSlash(rel)]; !ok {
				diffs = append(diffs, filepath.ToSlash(rel)+" is not generated any more")
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return diffs, nil
}
