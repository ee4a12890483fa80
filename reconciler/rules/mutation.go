package rules

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Errors of Apply, matched with errors.Is.
var (
	// ErrNotSynced: a name or namespace rewrite strips a prefix or suffix the object
	// lacks, so the object is not synced. TargetKey reports it without an error.
	ErrNotSynced = errors.New("object is not synced: its name or namespace lacks the prefix or suffix to strip")
	// ErrInvalidName: the rewritten name or namespace is not valid.
	ErrInvalidName = errors.New("invalid rewritten name")
)

// Mutation is the merged mutations of the matching entries of spec.rules. The zero
// Mutation copies an object unchanged, apart from the metadata and status Apply drops.
type Mutation struct {
	// SyncRules are the indexes in spec.rules of the matching entries.
	SyncRules []int
	// SourceGVK is the rule's spec.groupVersionKind.
	SourceGVK schema.GroupVersionKind
	// GVK is the kind copies are written as; empty: the source's.
	GVK schema.GroupVersionKind
	// AddLabels are set on the copy, then RemoveLabels are deleted.
	AddLabels    map[string]string
	RemoveLabels []string
	// AddAnnotations are set on the copy, then RemoveAnnotations are deleted.
	AddAnnotations    map[string]string
	RemoveAnnotations []string
	// Overrides are applied in order.
	Overrides []Override
	// SyncStatus keeps the source's status in the copy.
	SyncStatus bool
	// Name and Namespace rewrite the copy's name and namespace; zero: unchanged.
	Name      v1alpha1.NameMutations
	Namespace v1alpha1.NameMutations
}

// OverrideError is an override that failed in Apply.
type OverrideError struct {
	// Field is the override in the rule, e.g. spec.rules[0].mutations.overrides[1].
	Field string
	// Type and Path are the override's.
	Type v1alpha1.OverlayPatchType
	Path string
	Err  error
}

func (e *OverrideError) Error() string {
	return fmt.Sprintf("%s (%s %q): %v", e.Field, e.Type, e.Path, e.Err)
}

func (e *OverrideError) Unwrap() error { return e.Err }

// TargetGVK is the GVK of the copy of an object of kind source.
func (m Mutation) TargetGVK(source schema.GroupVersionKind) schema.GroupVersionKind {
	if m.GVK.Empty() {
		return source
	}
	return m.GVK
}

// TargetKey maps the source object's namespace/name to the copy's, applying the name and
// namespace rewrites (strip prefix, strip suffix, add prefix, add suffix). ok is false
// when a strip is set and the source lacks it, or nothing is left after stripping: the
// object is not synced. The empty namespace of a cluster-scoped object stays empty.
func (m Mutation) TargetKey(key types.NamespacedName) (types.NamespacedName, bool) {
	name, ok := rewrite(m.Name, key.Name)
	if !ok {
		return types.NamespacedName{}, false
	}
	ns := key.Namespace
	if ns != "" {
		if ns, ok = rewrite(m.Namespace, ns); !ok {
			return types.NamespacedName{}, false
		}
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func rewrite(r v1alpha1.NameMutations, s string) (string, bool) {
	var ok bool
	if r.StripPrefix != "" {
		if s, ok = strings.CutPrefix(s, r.StripPrefix); !ok {
			return "", false
		}
	}
	if r.StripSuffix != "" {
		if s, ok = strings.CutSuffix(s, r.StripSuffix); !ok {
			return "", false
		}
	}
	if s == "" && (r.StripPrefix != "" || r.StripSuffix != "") {
		return "", false
	}
	return r.AddPrefix + s + r.AddSuffix, true
}

// unrewrite is the inverse of rewrite: the source name that r rewrites to s.
func unrewrite(r v1alpha1.NameMutations, s string) (string, bool) {
	var ok bool
	if r.AddSuffix != "" {
		if s, ok = strings.CutSuffix(s, r.AddSuffix); !ok {
			return "", false
		}
	}
	if r.AddPrefix != "" {
		if s, ok = strings.CutPrefix(s, r.AddPrefix); !ok {
			return "", false
		}
	}
	if s == "" && (r.StripPrefix != "" || r.StripSuffix != "") {
		return "", false
	}
	return r.StripPrefix + s + r.StripSuffix, true
}

// SourceKeys returns the keys a copy at target may have been synced from: one per
// distinct combination of the name and namespace rewrites of the rule's entries of
// spec.rules (the identity included when some entry has no rewrite), deduplicated and
// sorted. The engine looks each up and checks with Match and TargetKey that it really
// maps to target.
func (r *Rule) SourceKeys(target types.NamespacedName) []types.NamespacedName {
	var out []types.NamespacedName
	for _, nr := range r.names {
		name, ok := unrewrite(nr, target.Name)
		if !ok {
			continue
		}
		if target.Namespace == "" {
			out = append(out, types.NamespacedName{Name: name})
			continue
		}
		for _, nsr := range r.namespaces {
			if ns, ok := unrewrite(nsr, target.Namespace); ok {
				out = append(out, types.NamespacedName{Namespace: ns, Name: name})
			}
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return slices.Compact(out)
}

// GVKString formats a GVK as the OriginalGVKAnnotation holds it: "<group>/<version>/<kind>",
// with an empty group for the core group ("/v1/Secret", "apps/v1/Deployment").
func GVKString(gvk schema.GroupVersionKind) string {
	return gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}

// ParseGVKString parses the value of the OriginalGVKAnnotation (see GVKString).
func ParseGVKString(s string) (schema.GroupVersionKind, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("%q is not of the form <group>/<version>/<kind>", s)
	}
	return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, nil
}

// keptMetadata are the metadata fields a copy keeps.
var keptMetadata = []string{"name", "namespace", "labels", "annotations"}

// Apply returns the copy of obj: a deep copy whose metadata is reduced to name,
// namespace, labels and annotations, without status unless SyncStatus, then with the GVK
// rewrite, labels, annotations, name and namespace rewrites and overrides applied (see
// the package documentation). It never modifies obj or tc. When tc.Object is nil, the
// templates see obj's content as .Object.
func (m Mutation) Apply(obj *unstructured.Unstructured, tc TemplateContext) (*unstructured.Unstructured, error) {
	if obj == nil || obj.Object == nil {
		return nil, errors.New("no object to copy")
	}
	source := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	target, ok := m.TargetKey(source)
	if !ok {
		return nil, fmt.Errorf("%s: %w", source, ErrNotSynced)
	}
	if err := validateTarget(source, target); err != nil {
		return nil, err
	}

	out, err := copyContent(obj.Object, m.SyncStatus)
	if err != nil {
		return nil, err
	}
	meta, err := copyKeptMetadata(obj.Object)
	if err != nil {
		return nil, err
	}
	lbls, err := metaMap(meta, "labels")
	if err != nil {
		return nil, err
	}
	annotations, err := metaMap(meta, "annotations")
	if err != nil {
		return nil, err
	}
	delete(annotations, corev1.LastAppliedConfigAnnotation)

	m.rewriteGVK(out, obj.GroupVersionKind(), annotations)
	m.editLabels(lbls, annotations)
	setOrDrop(meta, "labels", lbls)
	setOrDrop(meta, "annotations", annotations)

	meta["name"] = target.Name
	if target.Namespace != "" {
		meta["namespace"] = target.Namespace
	}
	out["metadata"] = meta

	if tc.Object == nil {
		tc.Object = obj.Object
	}
	budget := MaxCopyRendered
	for _, o := range m.Overrides {
		if err := o.apply(out, tc, &budget); err != nil {
			return nil, &OverrideError{Field: o.Field, Type: o.Type, Path: o.Path, Err: err}
		}
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// copyContent returns a deep copy of the top-level fields of object but its metadata,
// and its status only with syncStatus.
func copyContent(object map[string]any, syncStatus bool) (map[string]any, error) {
	out := make(map[string]any, len(object))
	for k, v := range object {
		if k == "metadata" || (k == "status" && !syncStatus) {
			continue
		}
		c, err := deepCopyJSON(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}

// copyKeptMetadata returns a deep copy of the fields of object's metadata that a copy
// keeps (keptMetadata).
func copyKeptMetadata(object map[string]any) (map[string]any, error) {
	meta := map[string]any{}
	v, ok := object["metadata"]
	if !ok || v == nil {
		return meta, nil
	}
	src, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata is %s, not an object", describe(v))
	}
	for _, k := range keptMetadata {
		if v, ok := src[k]; ok && v != nil {
			c, err := deepCopyJSON(v)
			if err != nil {
				return nil, fmt.Errorf("metadata.%s: %w", k, err)
			}
			meta[k] = c
		}
	}
	return meta, nil
}

// rewriteGVK sets the copy's apiVersion and kind in out to the target GVK of the
// source's (m.SourceGVK, or objGVK, the object's, when unset), and records the source's
// in annotations when they differ.
func (m Mutation) rewriteGVK(out map[string]any, objGVK schema.GroupVersionKind, annotations map[string]any) {
	sourceGVK := m.SourceGVK
	if sourceGVK.Empty() {
		sourceGVK = objGVK
	}
	targetGVK := m.TargetGVK(sourceGVK)
	if !targetGVK.Empty() {
		out["apiVersion"] = targetGVK.GroupVersion().String()
		out["kind"] = targetGVK.Kind
	}
	if targetGVK != sourceGVK {
		annotations[v1alpha1.OriginalGVKAnnotation] = GVKString(sourceGVK)
	}
}

// editLabels adds and removes the labels and annotations m adds and removes.
func (m Mutation) editLabels(lbls, annotations map[string]any) {
	for k, v := range m.AddLabels {
		lbls[k] = v
	}
	for _, k := range m.RemoveLabels {
		delete(lbls, k)
	}
	for k, v := range m.AddAnnotations {
		annotations[k] = v
	}
	for _, k := range m.RemoveAnnotations {
		delete(annotations, k)
	}
}

// metaMap returns meta[key] as a map, creating it when missing.
func metaMap(meta map[string]any, key string) (map[string]any, error) {
	switch v := meta[key].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("metadata.%s is %s, not an object", key, describe(v))
	}
}

func setOrDrop(meta map[string]any, key string, m map[string]any) {
	if len(m) == 0 {
		delete(meta, key)
		return
	}
	meta[key] = m
}

// validateTarget checks a rewritten name and namespace.
func validateTarget(source, target types.NamespacedName) error {
	if target.Name != source.Name {
		var msgs []string
		if len(validation.IsDNS1123Subdomain(source.Name)) == 0 {
			msgs = validation.IsDNS1123Subdomain(target.Name)
		} else {
			msgs = content.IsPathSegmentName(target.Name)
			if len(target.Name) > validation.DNS1123SubdomainMaxLength {
				msgs = append(msgs, validation.MaxLenError(validation.DNS1123SubdomainMaxLength))
			}
		}
		if len(msgs) > 0 {
			return fmt.Errorf("%w: name %q (from %q): %s", ErrInvalidName, target.Name, source.Name, strings.Join(msgs, "; "))
		}
	}
	if target.Namespace != source.Namespace {
		if msgs := validation.IsDNS1123Label(target.Namespace); len(msgs) > 0 {
			return fmt.Errorf("%w: namespace %q (from %q): %s", ErrInvalidName, target.Namespace, source.Namespace, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// apply applies the override to the copy's content.
// budget is what the copy's overrides may still render, in bytes.
func (o Override) apply(content map[string]any, tc TemplateContext, budget *int) error {
	if o.Type == v1alpha1.OverlayPatchTypeRemove {
		removePath(content, o.steps)
		return nil
	}
	text, err := o.value.render(tc)
	if err != nil {
		return err
	}
	if *budget -= len(text); *budget < 0 {
		return ErrCopyRenderedTooLarge
	}
	var v any = text
	if o.ParseValue {
		if v, err = parseYAMLValue(text); err != nil {
			return err
		}
	}
	return setPath(content, o.steps, v)
}

// parseYAMLValue parses a rendered value as YAML into JSON-compatible values: integers
// as int64, other numbers as float64, as in unstructured content.
func parseYAMLValue(text string) (any, error) {
	if len(text) > MaxRenderedSize {
		return nil, ErrRenderedTooLarge
	}
	j, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("value is not valid YAML: %w", err)
	}
	if len(j) > 2*MaxRenderedSize {
		return nil, fmt.Errorf("parsed value: %w", ErrRenderedTooLarge)
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, fmt.Errorf("value is not valid YAML: %w", err)
	}
	return v, nil
}
