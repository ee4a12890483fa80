package rules

import (
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Sources reports whether a peer with these ClusterFeatures is a source of the rule:
// every clusterFeatureMatch entry must be satisfied by at least one ClusterFeature
// (spec.featureName equal when the entry sets featureName, and its labels matching
// matchLabels and matchExpressions). A rule without entries takes every peer.
func (r *Rule) Sources(features []v1alpha1.ClusterFeature) bool {
	for _, m := range r.features {
		if !slices.ContainsFunc(features, m.matches) {
			return false
		}
	}
	return true
}

// NeedsFeatures reports whether Sources looks at the ClusterFeatures at all: a rule
// without clusterFeatureMatch entries takes every peer.
func (r *Rule) NeedsFeatures() bool { return len(r.features) > 0 }

func (m featureMatcher) matches(f v1alpha1.ClusterFeature) bool {
	if m.featureName != "" && m.featureName != f.Spec.FeatureName {
		return false
	}
	return m.selector == nil || m.selector.Matches(labels.Set(f.Labels))
}

// ReadsContent reports whether Match reads more of an object than its apiVersion, kind,
// name, namespace, labels and annotations: whether an entry selects by content.
func (r *Rule) ReadsContent() bool {
	for i := range r.syncRules {
		for j := range r.syncRules[i].matches {
			if len(r.syncRules[i].matches[j].content) > 0 {
				return true
			}
		}
	}
	return false
}

// Match reports whether the source object matches the rule and returns the merged
// mutations of every matching entry of spec.rules, in order. See the package
// documentation for the semantics.
func (r *Rule) Match(obj *unstructured.Unstructured) (Mutation, bool) {
	if obj == nil || obj.Object == nil {
		return Mutation{}, false
	}
	if av := obj.GetAPIVersion(); av != "" && av != r.GVK.GroupVersion().String() {
		return Mutation{}, false
	}
	if k := obj.GetKind(); k != "" && k != r.GVK.Kind {
		return Mutation{}, false
	}
	o := matchedObject{u: obj}
	var matched []*Mutation
	for i := range r.syncRules {
		if r.syncRules[i].matchesObject(&o) {
			matched = append(matched, &r.syncRules[i].mutation)
		}
	}
	if len(matched) == 0 {
		return Mutation{}, false
	}
	return merge(matched), true
}

// matchedObject caches what matching reads from an object.
type matchedObject struct {
	u                   *unstructured.Unstructured
	labels, annotations map[string]string
	read                bool
}

func (o *matchedObject) load() {
	if !o.read {
		o.labels = o.u.GetLabels()
		o.annotations = o.u.GetAnnotations()
		o.read = true
	}
}

func (sr *syncRule) matchesObject(o *matchedObject) bool {
	if len(sr.matches) == 0 {
		return true
	}
	for i := range sr.matches {
		if sr.matches[i].matches(o) {
			return true
		}
	}
	return false
}

func (m *objectMatcher) matches(o *matchedObject) bool {
	if m.name != "" && m.name != o.u.GetName() {
		return false
	}
	ns := o.u.GetNamespace()
	if m.namespace != "" && m.namespace != ns {
		return false
	}
	if len(m.namespaces) > 0 && (ns == "" || !slices.Contains(m.namespaces, ns)) {
		return false
	}
	if len(m.labels) > 0 {
		o.load()
		if !slices.ContainsFunc(m.labels, func(s labels.Selector) bool { return s.Matches(labels.Set(o.labels)) }) {
			return false
		}
	}
	if len(m.annotations) > 0 {
		o.load()
		if !slices.ContainsFunc(m.annotations, func(s annotationSelector) bool { return s.matches(o.annotations) }) {
			return false
		}
	}
	for i := range m.content {
		if !m.content[i].matches(o.u.Object) {
			return false
		}
	}
	return true
}

func (s annotationSelector) matches(annotations map[string]string) bool {
	for k, v := range s.match {
		if got, ok := annotations[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.exprs {
		v, ok := annotations[e.key]
		switch e.op {
		case v1alpha1.AnnotationSelectorOpIn:
			if !ok || !slices.Contains(e.values, v) {
				return false
			}
		case v1alpha1.AnnotationSelectorOpNotIn:
			if ok && slices.Contains(e.values, v) {
				return false
			}
		case v1alpha1.AnnotationSelectorOpExists:
			if !ok {
				return false
			}
		case v1alpha1.AnnotationSelectorOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func (c *contentMatcher) matches(content map[string]any) bool {
	if c.jsonPath == nil {
		v, ok := getPath(content, c.steps)
		return ok && c.valueMatches(v)
	}
	j := c.jsonPath.Get().(*jsonpath.JSONPath)
	defer c.jsonPath.Put(j)
	results, err := j.FindResults(content)
	if err != nil {
		return false
	}
	for _, rs := range results {
		for _, rv := range rs {
			if rv.IsValid() && rv.CanInterface() && c.valueMatches(jsonValue(rv)) {
				return true
			}
		}
	}
	return false
}

// jsonValue unwraps a JSONPath result.
func jsonValue(rv reflect.Value) any {
	for rv.Kind() == reflect.Interface && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Interface {
		return nil
	}
	return rv.Interface()
}

func (c *contentMatcher) valueMatches(v any) bool {
	if c.value.Type == intstr.Int {
		return intMatches(v, int64(c.value.IntVal))
	}
	return stringMatches(v, c.value.StrVal)
}

// merge merges the mutations of the matching entries of spec.rules, in order.
func merge(ms []*Mutation) Mutation {
	out := Mutation{SourceGVK: ms[0].SourceGVK}
	var removeLabels, removeAnnotations []string
	for _, m := range ms {
		out.SyncRules = append(out.SyncRules, m.SyncRules...)
		if out.GVK.Empty() {
			out.GVK = m.GVK
		}
		if len(m.AddLabels) > 0 {
			if out.AddLabels == nil {
				out.AddLabels = map[string]string{}
			}
			maps.Copy(out.AddLabels, m.AddLabels)
		}
		if len(m.AddAnnotations) > 0 {
			if out.AddAnnotations == nil {
				out.AddAnnotations = map[string]string{}
			}
			maps.Copy(out.AddAnnotations, m.AddAnnotations)
		}
		removeLabels = append(removeLabels, m.RemoveLabels...)
		removeAnnotations = append(removeAnnotations, m.RemoveAnnotations...)
		out.Overrides = append(out.Overrides, m.Overrides...)
		out.SyncStatus = out.SyncStatus || m.SyncStatus
		if out.Name == (v1alpha1.NameMutations{}) {
			out.Name = m.Name
		}
		if out.Namespace == (v1alpha1.NameMutations{}) {
			out.Namespace = m.Namespace
		}
	}
	out.RemoveLabels = sortedSet(removeLabels)
	out.RemoveAnnotations = sortedSet(removeAnnotations)
	return out
}

// SourceNamespaces returns the namespaces the rule can match objects in, sorted, and
// restricted true, when every entry of spec.rules lists namespaces (objectKey.namespace
// or namespaces) in every entry of its match list; the engine may then watch just these
// namespaces of a namespaced kind (a rule without entries in spec.rules gives an empty
// list: it matches nothing). Otherwise it returns nil and false.
func (r *Rule) SourceNamespaces() (namespaces []string, restricted bool) {
	set := map[string]bool{}
	for _, sr := range r.syncRules {
		if len(sr.matches) == 0 {
			return nil, false
		}
		for _, m := range sr.matches {
			switch {
			case m.namespace != "" && len(m.namespaces) > 0:
				if slices.Contains(m.namespaces, m.namespace) {
					set[m.namespace] = true
				}
			case m.namespace != "":
				set[m.namespace] = true
			case len(m.namespaces) > 0:
				for _, ns := range m.namespaces {
					set[ns] = true
				}
			default:
				return nil, false
			}
		}
	}
	if len(set) == 0 {
		return []string{}, true
	}
	return slices.Sorted(maps.Keys(set)), true
}
