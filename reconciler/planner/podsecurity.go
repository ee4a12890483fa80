package planner

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// A copy that carries a pod template runs code here, as whatever the template asks for:
// it is judged by the Pod Security Standards with the library the API server's own
// PodSecurity admission uses (k8s.io/pod-security-admission), at the level that applies
// to its namespace here. And the registry's namespaces hold its identities and keys:
// rules write nothing there but the Secrets the seed's scenarios sync.

// podSecurityEvaluator is the Pod Security Standards' checks, built once: the library's
// default checks, at their latest version.
var podSecurityEvaluator = sync.OnceValues(func() (psapolicy.Evaluator, error) {
	return psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
})

// WithNamespaceLevels returns p with the pod-security.kubernetes.io/enforce label of the
// cluster's namespaces (namespace name -> label value; namespaces without the label may
// be left out). A namespace's label, when stricter than the level of the SyncPolicies,
// is the level the pod templates of copies into it must meet; an invalid value counts
// as restricted, as the API server's PodSecurity admission reads it.
func (p Policy) WithNamespaceLevels(levels map[string]string) Policy {
	p.nsLevels = levels
	return p
}

// EnforceLevelLabel is the namespace label whose level the pod templates of copies must
// meet when it is stricter than this cluster's SyncPolicies.
const EnforceLevelLabel = psaapi.EnforceLevelLabel

// podTemplatePath returns where the pod template of a copy of kind gk is: its pod's
// metadata and spec, or ok false for kinds without one. It allocates nothing (CheckCopy
// runs it on every copy).
func podTemplatePath(gk schema.GroupKind) (meta, spec []string, ok bool) {
	switch gk.Group {
	case "":
		switch gk.Kind {
		case "Pod":
			return podMetaPath, podSpecPath, true
		case "PodTemplate":
			return templateMetaPath, templateSpecPath, true
		case "ReplicationController":
			return specTemplateMetaPath, specTemplateSpecPath, true
		}
	case "apps":
		switch gk.Kind {
		case "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet":
			return specTemplateMetaPath, specTemplateSpecPath, true
		}
	case "batch":
		switch gk.Kind {
		case "Job":
			return specTemplateMetaPath, specTemplateSpecPath, true
		case "CronJob":
			return cronJobTemplateMetaPath, cronJobTemplateSpecPath, true
		}
	}
	return nil, nil, false
}

var (
	podMetaPath              = []string{"metadata"}
	podSpecPath              = []string{"spec"}
	templateMetaPath         = []string{"template", "metadata"}
	templateSpecPath         = []string{"template", "spec"}
	specTemplateMetaPath     = []string{"spec", "template", "metadata"}
	specTemplateSpecPath     = []string{"spec", "template", "spec"}
	cronJobTemplateMetaPath  = []string{"spec", "jobTemplate", "spec", "template", "metadata"}
	cronJobTemplateSpecPath  = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	registryReservedPrefix   = "cluster-registry-"
	registryNamespaceRefusal = "rules write nothing there but Secrets (never service account or bootstrap tokens, the registry's reader Secrets, or Secrets named %s*), and no SyncPolicy can allow a %s there"
)

// HasPodTemplate reports whether copies of kind gk carry a pod template that Pod
// Security judges here.
func HasPodTemplate(gk schema.GroupKind) bool {
	_, _, ok := podTemplatePath(gk)
	return ok
}

// inRegistryNamespaces reports whether ns is the registry namespace or its readers
// namespace (without building the readers namespace's name).
func (p Policy) inRegistryNamespaces(ns string) (registry, readers bool) {
	if p.namespace == "" || ns == "" {
		return false, false
	}
	if ns == p.namespace {
		return true, false
	}
	suffix := v1alpha1.ReadersNamespaceSuffix
	return false, len(ns) == len(p.namespace)+len(suffix) && strings.HasPrefix(ns, p.namespace) && strings.HasSuffix(ns, suffix)
}

// checkRegistryNamespaces refuses copies into the registry's namespaces, whatever the
// policy: in the readers namespace nothing; in the registry namespace anything but a
// Secret (a pod there would run as the registry's ServiceAccounts, one of which holds the
// controller's token), and Secrets with the registry's reserved names; and the
// registry's Namespaces themselves. The token-bearing Secrets and the reader Secrets are
// refused before (CheckCopy). what names the copy.
func (p Policy) checkRegistryNamespaces(gk schema.GroupKind, copy *unstructured.Unstructured, what string) *Refusal {
	if gk.Group == "" && gk.Kind == "Namespace" {
		if registry, readers := p.inRegistryNamespaces(copy.GetName()); registry || readers {
			return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: what + ": the registry's own namespace is never written by rules, and no SyncPolicy can allow it"}
		}
		return nil
	}
	ns := copy.GetNamespace()
	registry, readers := p.inRegistryNamespaces(ns)
	switch {
	case readers:
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf(
			"%s: namespace %s holds the registry's per-peer readers and its key: rules write nothing there, and no SyncPolicy can allow it", what, ns)}
	case !registry:
		return nil
	case HasPodTemplate(gk):
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf(
			"%s: namespace %s is the registry's: a pod there would run as its ServiceAccounts (%s holds the controller's token); "+registryNamespaceRefusal,
			what, ns, v1alpha1.ControllerName, registryReservedPrefix, gk.Kind)}
	case gk.Group != "" || gk.Kind != "Secret":
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf(
			"%s: namespace %s is the registry's: "+registryNamespaceRefusal, what, ns, registryReservedPrefix, gk.Kind)}
	case strings.HasPrefix(copy.GetName(), registryReservedPrefix):
		return &Refusal{Reason: v1alpha1.ReasonCopyRefused, Message: fmt.Sprintf(
			"%s: the names %s* in namespace %s are the registry's own: never written by rules", what, registryReservedPrefix, ns)}
	}
	return nil
}

// podSecurityLevel is the level the pod templates of copies into a namespace must meet
// here, and what sets it.
type podSecurityLevel struct {
	// level is the strictest of policy and label.
	level psaapi.Level
	// policy is the strictest spec.podSecurity of the SyncPolicies, baseline when none
	// sets it (bySyncPolicy false).
	policy       psaapi.Level
	bySyncPolicy bool
	// label is the namespace's enforce label as read (an invalid value is restricted),
	// labelValue its value; hasLabel false when the namespace has none.
	label      psaapi.Level
	labelValue string
	hasLabel   bool
}

// podSecurityLevelOf returns the level of namespace ns: the strictest of the
// SyncPolicies' spec.podSecurity (baseline when none sets it) and the namespace's
// enforce label.
func (p Policy) podSecurityLevelOf(ns string) podSecurityLevel {
	l := podSecurityLevel{policy: psaapi.LevelBaseline}
	for _, s := range p.specs {
		if s.PodSecurity == "" {
			continue
		}
		v, _ := psaapi.ParseLevel(s.PodSecurity) // an invalid value (the CRD refuses it) is restricted
		if !l.bySyncPolicy || psaapi.CompareLevels(v, l.policy) > 0 {
			l.policy, l.bySyncPolicy = v, true
		}
	}
	l.level = l.policy
	if l.labelValue, l.hasLabel = p.nsLevels[ns]; l.hasLabel {
		l.label, _ = psaapi.ParseLevel(l.labelValue) // as PodSecurity admission: an invalid label is restricted
		if psaapi.CompareLevels(l.label, l.level) > 0 {
			l.level = l.label
		}
	}
	return l
}

// checkPodSecurity judges the pod template of a copy of a kind that carries one (gk) by
// the Pod Security Standards, at the level that applies to its namespace here. It
// returns nil at once for other kinds, allocating nothing. what names the copy.
func (p Policy) checkPodSecurity(gk schema.GroupKind, copy *unstructured.Unstructured, what string) *Refusal {
	metaPath, specPath, ok := podTemplatePath(gk)
	if !ok {
		return p.checkEmbeddedPodSpecs(copy, what)
	}
	return p.judgePodTemplate(copy, metaPath, specPath, what)
}

// checkEmbeddedPodSpecs judges the pod specs found in a copy of any other kind (a custom
// resource's, such as a rollout's or a serverless service's template): each object under
// the copy's top-level fields but metadata and status (which run nothing) that has a
// "containers" list of objects is a pod spec, and the "metadata" next to it the pod's
// metadata. It allocates nothing when the copy holds none.
func (p Policy) checkEmbeddedPodSpecs(copy *unstructured.Unstructured, what string) *Refusal {
	for k, v := range copy.Object {
		if k == "metadata" || k == "apiVersion" || k == "kind" || k == "status" || !hasPodSpec(v, 0) {
			continue
		}
		var specs []podSpecAt
		collectPodSpecs(v, copy.Object, k, 0, &specs)
		for _, at := range specs {
			meta, spec, err := podOf(at.meta, at.spec)
			if ref := p.judgePod(copy.GetNamespace(), meta, spec, err, what+" (a pod spec at "+at.path+")"); ref != nil {
				return ref
			}
		}
	}
	return nil
}

// maxPodSpecDepth bounds how deep a custom resource is searched for pod specs.
const maxPodSpecDepth = 12

// isPodSpec reports whether m looks like a pod spec: a "containers" list of objects.
func isPodSpec(m map[string]any) bool {
	cs, ok := m["containers"].([]any)
	if !ok || len(cs) == 0 {
		return false
	}
	_, isObj := cs[0].(map[string]any)
	return isObj
}

// hasPodSpec reports whether v holds a pod spec, allocating nothing.
func hasPodSpec(v any, depth int) bool {
	if depth > maxPodSpecDepth {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		if isPodSpec(t) {
			return true
		}
		for _, c := range t {
			if hasPodSpec(c, depth+1) {
				return true
			}
		}
	case []any:
		for _, c := range t {
			if hasPodSpec(c, depth+1) {
				return true
			}
		}
	}
	return false
}

// podSpecAt is a pod spec found in an object, with the metadata next to it.
type podSpecAt struct {
	path       string
	meta, spec map[string]any
}

// collectPodSpecs appends the pod specs below v (at path, a field of parent) to out.
func collectPodSpecs(v any, parent map[string]any, path string, depth int, out *[]podSpecAt) {
	if depth > maxPodSpecDepth {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if isPodSpec(t) {
			meta, _ := parent["metadata"].(map[string]any)
			*out = append(*out, podSpecAt{path: path, meta: meta, spec: t})
			return
		}
		for k, c := range t {
			collectPodSpecs(c, t, path+"."+k, depth+1, out)
		}
	case []any:
		for i, c := range t {
			collectPodSpecs(c, parent, path+"["+strconv.Itoa(i)+"]", depth+1, out)
		}
	}
}

// podOf converts a pod's metadata and spec.
func podOf(metaObj, specObj map[string]any) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	meta, spec := &metav1.ObjectMeta{}, &corev1.PodSpec{}
	if metaObj != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(metaObj, meta); err != nil {
			return nil, nil, fmt.Errorf("metadata: %w", err)
		}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(specObj, spec); err != nil {
		return nil, nil, fmt.Errorf("spec: %w", err)
	}
	return meta, spec, nil
}

// judgePodTemplate judges the pod template of copy at metaPath and specPath.
func (p Policy) judgePodTemplate(copy *unstructured.Unstructured, metaPath, specPath []string, what string) *Refusal {
	if p.podSecurityLevelOf(copy.GetNamespace()).level == psaapi.LevelPrivileged {
		return nil // the template is not even read
	}
	meta, spec, err := podTemplateOf(copy, metaPath, specPath)
	return p.judgePod(copy.GetNamespace(), meta, spec, err, what)
}

// judgePod judges a pod's metadata and spec (or the error reading them) by the level of
// namespace ns.
func (p Policy) judgePod(ns string, meta *metav1.ObjectMeta, spec *corev1.PodSpec, err error, what string) *Refusal {
	lv := p.podSecurityLevelOf(ns)
	if lv.level == psaapi.LevelPrivileged {
		return nil
	}
	refuse := func(format string, args ...any) *Refusal {
		return &Refusal{Reason: v1alpha1.ReasonPodSecurity, Message: what + ": " + fmt.Sprintf(format, args...)}
	}
	if err != nil {
		return refuse("its pod template cannot be read (%v): Pod Security cannot judge it, so it is never written", err)
	}
	evaluator, err := podSecurityEvaluator()
	if err != nil {
		return refuse("the Pod Security checks cannot be built (%v): pod templates are not written", err)
	}
	evaluate := func(l psaapi.Level) psapolicy.AggregateCheckResult {
		return psapolicy.AggregateCheckResults(evaluator.EvaluatePod(psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()}, meta, spec))
	}
	result := evaluate(lv.level)
	if result.Allowed {
		return nil
	}
	// The least strict level that admits it, and what sets the level above it.
	need := psaapi.LevelPrivileged
	if lv.level == psaapi.LevelRestricted && evaluate(psaapi.LevelBaseline).Allowed {
		need = psaapi.LevelBaseline
	}
	var why, allow []string
	if psaapi.CompareLevels(lv.policy, need) > 0 {
		if lv.bySyncPolicy {
			why = append(why, fmt.Sprintf("a SyncPolicy of this cluster sets spec.podSecurity: %s", lv.policy))
		} else {
			why = append(why, "the default: no SyncPolicy of this cluster sets spec.podSecurity")
		}
		allow = append(allow, fmt.Sprintf("a SyncPolicy with spec.podSecurity: %s (and none stricter)", need))
	}
	if lv.hasLabel && psaapi.CompareLevels(lv.label, need) > 0 {
		why = append(why, fmt.Sprintf("namespace %s is labelled %s=%s", ns, psaapi.EnforceLevelLabel, lv.labelValue))
		allow = append(allow, fmt.Sprintf("that label at %s", need))
	}
	return refuse("violates PodSecurity %q: %s; the level here is %s (%s); it needs %s",
		string(lv.level)+":latest", result.ForbiddenDetail(), lv.level, strings.Join(why, "; "), strings.Join(allow, " and "))
}

// podTemplateOf reads the pod metadata and spec at the given paths of obj. A template
// that is absent reads as empty (the API server refuses such an object); one that is not
// an object, or whose fields do not convert, is an error.
func podTemplateOf(obj *unstructured.Unstructured, metaPath, specPath []string) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	meta, spec := &metav1.ObjectMeta{}, &corev1.PodSpec{}
	for _, f := range []struct {
		path []string
		into any
	}{{metaPath, meta}, {specPath, spec}} {
		v, found, err := unstructured.NestedFieldNoCopy(obj.Object, f.path...)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", strings.Join(f.path, "."), err)
		}
		if !found || v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%s is a %T, not an object", strings.Join(f.path, "."), v)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, f.into); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", strings.Join(f.path, "."), err)
		}
	}
	return meta, spec, nil
}
