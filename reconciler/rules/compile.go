package rules

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Problem is one problem of an invalid rule.
type Problem struct {
	// Field is the path of the offending field, e.g. spec.rules[0].match[1].labels[0].
	Field string
	// Message says what is wrong.
	Message string
}

// InvalidRuleError lists every problem of an invalid ResourceSyncRule.
type InvalidRuleError struct {
	// Rule is the name of the ResourceSyncRule.
	Rule string
	// Problems in the order of the fields.
	Problems []Problem
}

// Error joins the problems: `ResourceSyncRule "x" is invalid: field: message; ...`.
func (e *InvalidRuleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ResourceSyncRule %q is invalid: ", e.Rule)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Field)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// Rule is a compiled ResourceSyncRule. It is immutable and safe for concurrent use.
type Rule struct {
	// Name is the name of the ResourceSyncRule.
	Name string
	// GVK is the kind read from sources (spec.groupVersionKind).
	GVK schema.GroupVersionKind
	// TargetGVKs are the kinds copies may be written as, sorted: GVK unless every entry
	// of spec.rules rewrites it, plus every mutations.groupVersionKind. The engine
	// watches these locally.
	TargetGVKs []schema.GroupVersionKind

	features  []featureMatcher
	syncRules []syncRule
	// IgnoreFields are spec.ignoreFields: the paths whose values the destination keeps.
	IgnoreFields []FieldPath

	// names and namespaces are the distinct rewrites of the entries of spec.rules,
	// including the identity (the zero NameMutations) when some entry has none.
	names, namespaces []v1alpha1.NameMutations
}

// featureMatcher is a compiled entry of spec.clusterFeatureMatch.
type featureMatcher struct {
	featureName string
	// selector is nil when the entry has no matchLabels or matchExpressions.
	selector labels.Selector
}

// syncRule is a compiled entry of spec.rules.
type syncRule struct {
	matches  []objectMatcher
	mutation Mutation
}

// objectMatcher is a compiled entry of a match list.
type objectMatcher struct {
	name, namespace string
	namespaces      []string
	labels          []labels.Selector
	annotations     []annotationSelector
	content         []contentMatcher
}

// annotationSelector is a compiled AnnotationSelector.
type annotationSelector struct {
	match map[string]string
	exprs []annotationRequirement
}

type annotationRequirement struct {
	key    string
	op     v1alpha1.AnnotationSelectorOperator
	values []string
}

// contentMatcher is a compiled ContentSelector.
type contentMatcher struct {
	steps []step
	// jsonPath, when steps is nil, evaluates a kubectl JSONPath; JSONPath values are not
	// safe for concurrent use, so the pool holds parsed ones.
	jsonPath *sync.Pool
	value    intstr.IntOrString
}

// Override is a compiled override of a Mutation.
type Override struct {
	// Field is the path of the override in the rule, e.g. spec.rules[0].mutations.overrides[1].
	Field string
	// Type is replace or remove.
	Type v1alpha1.OverlayPatchType
	// Path is the path as written in the rule.
	Path string
	// Value is the value template as written in the rule.
	Value string
	// ParseValue parses the rendered value as YAML.
	ParseValue bool

	steps []step
	value *valueTemplate
}

// protectedPaths are the paths overrides may not touch: the identity of the copy is set
// by the groupVersionKind, name and namespace mutations, and TargetKey must agree with
// Apply.
var protectedPaths = [][]string{{"apiVersion"}, {"kind"}, {"metadata"}, {"metadata", "name"}, {"metadata", "namespace"}}

// namespaceAffix is what a prefix or suffix added to a namespace may hold.
var namespaceAffix = regexp.MustCompile(`^[a-z0-9-]*$`)

// Compile validates a ResourceSyncRule and prepares it: parsed label selectors,
// annotation selectors, content keys, override paths and templates. Every problem is
// reported in an *InvalidRuleError. Whether the kind exists is not checked.
func Compile(rsr *v1alpha1.ResourceSyncRule) (*Rule, error) {
	if rsr == nil {
		return nil, &InvalidRuleError{Problems: []Problem{{Field: "", Message: "no ResourceSyncRule"}}}
	}
	rsr = rsr.DeepCopy()
	c := compiler{}
	spec := field.NewPath("spec")
	r := &Rule{Name: rsr.Name, GVK: rsr.Spec.GVK.Schema()}

	gvkPath := spec.Child("groupVersionKind")
	c.gvk(gvkPath, rsr.Spec.GVK)

	for i, m := range rsr.Spec.ClusterFeatureMatches {
		f := featureMatcher{featureName: m.FeatureName}
		if len(m.MatchLabels) > 0 || len(m.MatchExpressions) > 0 {
			f.selector = c.labelSelector(spec.Child("clusterFeatureMatch").Index(i),
				&metav1.LabelSelector{MatchLabels: m.MatchLabels, MatchExpressions: m.MatchExpressions})
		}
		r.features = append(r.features, f)
	}

	rulesPath := spec.Child("rules")
	for i, sr := range rsr.Spec.Rules {
		r.syncRules = append(r.syncRules, c.syncRule(rulesPath.Index(i), i, sr, r.GVK))
	}

	for i, f := range rsr.Spec.IgnoreFields {
		if fp, ok := c.ignoreField(spec.Child("ignoreFields").Index(i), f); ok {
			r.IgnoreFields = append(r.IgnoreFields, fp)
		}
	}

	if len(c.problems) > 0 {
		return nil, &InvalidRuleError{Rule: rsr.Name, Problems: c.problems}
	}

	r.TargetGVKs = targetGVKs(r.GVK, r.syncRules)
	r.names = rewrites(r.syncRules, func(m Mutation) v1alpha1.NameMutations { return m.Name })
	r.namespaces = rewrites(r.syncRules, func(m Mutation) v1alpha1.NameMutations { return m.Namespace })
	return r, nil
}

func targetGVKs(source schema.GroupVersionKind, rules []syncRule) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, sr := range rules {
		out = append(out, sr.mutation.TargetGVK(source))
	}
	if len(rules) == 0 {
		out = append(out, source)
	}
	slices.SortFunc(out, compareGVK)
	return slices.Compact(out)
}

func compareGVK(a, b schema.GroupVersionKind) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Kind, b.Kind))
}

// rewrites returns the distinct rewrites get finds in rules, the identity included when
// some rule has none, sorted.
func rewrites(rules []syncRule, get func(Mutation) v1alpha1.NameMutations) []v1alpha1.NameMutations {
	var out []v1alpha1.NameMutations
	for _, sr := range rules {
		out = append(out, get(sr.mutation))
	}
	slices.SortFunc(out, func(a, b v1alpha1.NameMutations) int {
		return cmp.Or(cmp.Compare(a.StripPrefix, b.StripPrefix), cmp.Compare(a.StripSuffix, b.StripSuffix),
			cmp.Compare(a.AddPrefix, b.AddPrefix), cmp.Compare(a.AddSuffix, b.AddSuffix))
	})
	return slices.Compact(out)
}

// compiler collects the problems of a rule.
type compiler struct {
	problems []Problem
}

func (c *compiler) add(p *field.Path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Field: p.String(), Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) gvk(p *field.Path, g v1alpha1.GroupVersionKind) {
	if g.Version == "" {
		c.add(p.Child("version"), "must not be empty")
	}
	if g.Kind == "" {
		c.add(p.Child("kind"), "must not be empty")
	}
}

func (c *compiler) labelSelector(p *field.Path, s *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		c.add(p, "invalid label selector: %v", err)
		return nil
	}
	return sel
}

func (c *compiler) syncRule(p *field.Path, index int, sr v1alpha1.SyncRule, source schema.GroupVersionKind) syncRule {
	var out syncRule
	for i, m := range sr.Matches {
		out.matches = append(out.matches, c.objectMatcher(p.Child("match").Index(i), m))
	}
	out.mutation = c.mutation(p.Child("mutations"), index, sr.Mutations, source)
	return out
}

func (c *compiler) objectMatcher(p *field.Path, m v1alpha1.SyncRuleMatch) objectMatcher {
	out := objectMatcher{name: m.ObjectKey.Name, namespace: m.ObjectKey.Namespace, namespaces: m.Namespaces}
	for i := range m.Labels {
		out.labels = append(out.labels, c.labelSelector(p.Child("labels").Index(i), &m.Labels[i]))
	}
	for i, a := range m.Annotations {
		out.annotations = append(out.annotations, c.annotationSelector(p.Child("annotations").Index(i), a))
	}
	for i, s := range m.Content {
		out.content = append(out.content, c.contentMatcher(p.Child("content").Index(i), s))
	}
	return out
}

func (c *compiler) annotationSelector(p *field.Path, a v1alpha1.AnnotationSelector) annotationSelector {
	out := annotationSelector{match: a.MatchAnnotations}
	for _, k := range slices.Sorted(maps.Keys(a.MatchAnnotations)) {
		for _, msg := range validation.IsQualifiedName(k) {
			c.add(p.Child("matchAnnotations").Key(k), "invalid annotation key: %s", msg)
		}
	}
	for i, e := range a.MatchExpressions {
		ep := p.Child("matchExpressions").Index(i)
		for _, msg := range validation.IsQualifiedName(e.Key) {
			c.add(ep.Child("key"), "invalid annotation key: %s", msg)
		}
		req := annotationRequirement{key: e.Key, op: e.Operator}
		for _, v := range e.Values {
			req.values = append(req.values, string(v))
		}
		switch e.Operator {
		case v1alpha1.AnnotationSelectorOpIn, v1alpha1.AnnotationSelectorOpNotIn:
			if len(e.Values) == 0 {
				c.add(ep.Child("values"), "must be non-empty for operator %s", e.Operator)
			}
		case v1alpha1.AnnotationSelectorOpExists, v1alpha1.AnnotationSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				c.add(ep.Child("values"), "must be empty for operator %s", e.Operator)
			}
		default:
			c.add(ep.Child("operator"), "unknown operator %q: use In, NotIn, Exists or DoesNotExist", e.Operator)
		}
		out.exprs = append(out.exprs, req)
	}
	return out
}

func (c *compiler) contentMatcher(p *field.Path, s v1alpha1.ContentSelector) contentMatcher {
	out := contentMatcher{value: s.Value}
	steps, err := parsePath(s.Key)
	if err == nil {
		out.steps = steps
		return out
	}
	if strings.HasPrefix(s.Key, "{") {
		// Not in our path syntax: a kubectl JSONPath, read only.
		if _, jerr := newJSONPath(s.Key); jerr == nil {
			key := s.Key
			out.jsonPath = &sync.Pool{New: func() any {
				j, _ := newJSONPath(key)
				return j
			}}
			return out
		}
	}
	c.add(p.Child("key"), "invalid path %q: %v", s.Key, err)
	return out
}

func newJSONPath(text string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("content").AllowMissingKeys(true)
	if err := j.Parse(text); err != nil {
		return nil, err
	}
	return j, nil
}

func (c *compiler) mutation(p *field.Path, index int, m v1alpha1.Mutations, source schema.GroupVersionKind) Mutation {
	out := Mutation{SyncRules: []int{index}, SourceGVK: source, SyncStatus: m.SyncStatus}
	if len(m.Overrides) > MaxOverrides {
		// A rule from another member's API server need not have passed this cluster's CRD.
		c.add(p.Child("overrides"), "has %d overrides: at most %d", len(m.Overrides), MaxOverrides)
		m.Overrides = nil
	}
	if m.GVK != nil {
		c.gvk(p.Child("groupVersionKind"), *m.GVK)
		out.GVK = m.GVK.Schema()
	}
	if m.Labels != nil {
		lp := p.Child("labels", "add")
		for _, k := range slices.Sorted(maps.Keys(m.Labels.Add)) {
			for _, msg := range validation.IsQualifiedName(k) {
				c.add(lp.Key(k), "invalid label key: %s", msg)
			}
			for _, msg := range validation.IsValidLabelValue(m.Labels.Add[k]) {
				c.add(lp.Key(k), "invalid label value %q: %s", m.Labels.Add[k], msg)
			}
		}
		out.AddLabels = m.Labels.Add
		out.RemoveLabels = sortedSet(m.Labels.Remove)
	}
	if m.Annotations != nil {
		ap := p.Child("annotations", "add")
		for _, k := range slices.Sorted(maps.Keys(m.Annotations.Add)) {
			for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
				c.add(ap.Key(k), "invalid annotation key: %s", msg)
			}
		}
		out.AddAnnotations = m.Annotations.Add
		out.RemoveAnnotations = sortedSet(m.Annotations.Remove)
	}
	if m.Name != nil {
		out.Name = *m.Name
	}
	if m.Namespace != nil {
		out.Namespace = *m.Namespace
		for _, a := range []struct{ name, value string }{{"addPrefix", m.Namespace.AddPrefix}, {"addSuffix", m.Namespace.AddSuffix}} {
			if !namespaceAffix.MatchString(a.value) {
				c.add(p.Child("namespace", a.name), "%q cannot be part of a namespace name: use lower-case letters, digits and '-'", a.value)
			}
		}
	}
	for i, o := range m.Overrides {
		if ov, ok := c.override(p.Child("overrides").Index(i), o); ok {
			out.Overrides = append(out.Overrides, ov)
		}
	}
	return out
}

func (c *compiler) override(p *field.Path, o v1alpha1.OverlayPatch) (Override, bool) {
	out := Override{Field: p.String(), Type: o.Type, Path: o.Path, Value: o.Value, ParseValue: o.ParseValue}
	ok := true
	switch o.Type {
	case "":
		out.Type = v1alpha1.OverlayPatchTypeReplace
	case v1alpha1.OverlayPatchTypeReplace, v1alpha1.OverlayPatchTypeRemove:
	default:
		c.add(p.Child("type"), "unknown type %q: use replace or remove", o.Type)
		ok = false
	}
	steps, err := parsePath(o.Path)
	switch {
	case err != nil:
		c.add(p.Child("path"), "invalid path %q: %v", o.Path, err)
		ok = false
	case isProtected(steps):
		c.add(p.Child("path"), "overrides cannot change %s: use the groupVersionKind, name and namespace mutations", formatPath(steps))
		ok = false
	}
	out.steps = steps
	if out.Type == v1alpha1.OverlayPatchTypeReplace {
		v, err := compileValue(o.Value)
		if err != nil {
			c.add(p.Child("value"), "invalid template: %v", err)
			return out, false
		}
		out.value = v
		if v.tmpl == nil && o.ParseValue {
			if _, err := parseYAMLValue(o.Value); err != nil {
				c.add(p.Child("value"), "%v", err)
				ok = false
			}
		}
	}
	return out, ok
}

// ignoreField compiles an entry of spec.ignoreFields. Under metadata only labels and
// annotations may be kept, and never the registry's own marks.
func (c *compiler) ignoreField(p *field.Path, s string) (FieldPath, bool) {
	fp, err := ParseFieldPath(s)
	if err != nil {
		c.add(p, "invalid path %q: %v", s, err)
		return FieldPath{}, false
	}
	st := fp.steps
	switch {
	case st[0].kind != stepKey:
		c.add(p, "invalid path %q: must start with a key", s)
		return FieldPath{}, false
	case st[0].key == "apiVersion" || st[0].key == "kind":
		c.add(p, "%s cannot be ignored: the kind of a copy is the rule's", fp)
		return FieldPath{}, false
	case st[0].key == "metadata" && (len(st) < 3 || st[1].kind != stepKey || (st[1].key != "labels" && st[1].key != "annotations")):
		c.add(p, "%s cannot be ignored: under metadata only labels and annotations (metadata.labels.KEY) may be kept", fp)
		return FieldPath{}, false
	case st[0].key == "metadata" && strings.HasPrefix(st[2].key, v1alpha1.MarkPrefix):
		c.add(p, "%s cannot be ignored: the registry's marks are the registry's", fp)
		return FieldPath{}, false
	}
	return fp, true
}

func isProtected(steps []step) bool {
	for _, pp := range protectedPaths {
		if len(pp) != len(steps) {
			continue
		}
		match := true
		for i, k := range pp {
			if steps[i].kind != stepKey || steps[i].key != k {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// sortedSet returns the distinct strings of s, sorted; nil when s is empty.
func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
