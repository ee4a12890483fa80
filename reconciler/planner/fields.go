package planner

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-registry/kubectl-registry/reconciler/rules"
)

// Fields each destination cluster assigns itself. Real clusters differ: their own service
// CIDRs and node ports, their own Job UIDs, their own volumes. A copy is created without
// the fields its cluster assigns, keeps the values its cluster assigned on every update,
// and those values never count as drift. Everything else the source sets is restored
// exactly. A rule's spec.ignoreFields adds the fields a local controller, an HPA or a
// webhook owns.

// AssignedField is a field of a kind that each cluster assigns itself.
type AssignedField struct {
	// Path names the field, for people (documentation, sync-diff).
	Path string
	// When says when the field is the cluster's, for people; empty: always.
	When string
	// keep gives desired (the copy's content) observed's value of the field; observed is
	// nil for a new copy, which then gets none.
	keep func(desired, observed map[string]any)
}

// Kinds whose fields are in the table.
var (
	gkService    = schema.GroupKind{Kind: "Service"}
	gkJob        = schema.GroupKind{Group: "batch", Kind: "Job"}
	gkPVC        = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	gkSA         = schema.GroupKind{Kind: "ServiceAccount"}
	gkPod        = schema.GroupKind{Kind: "Pod"}
	gkDeployment = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	gkDaemonSet  = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	gkNamespace  = schema.GroupKind{Kind: "Namespace"}
)

// Labels and annotations clusters assign.
const (
	jobControllerUIDLabel       = "batch.kubernetes.io/controller-uid"
	jobLegacyControllerUIDLabel = "controller-uid"
	jobNameLabel                = "batch.kubernetes.io/job-name"
	jobLegacyNameLabel          = "job-name"
	deploymentRevision          = "deployment.kubernetes.io/revision"
	daemonSetTemplateGeneration = "deprecated.daemonset.template.generation"
)

// pvcBindingAnnotations are set on a claim by the cluster's volume binding.
func pvcBindingAnnotations() []string {
	return []string{
		"pv.kubernetes.io/bind-completed",
		"pv.kubernetes.io/bound-by-controller",
		"volume.beta.kubernetes.io/storage-provisioner",
		"volume.kubernetes.io/storage-provisioner",
		"volume.kubernetes.io/selected-node",
	}
}

// AssignedFields returns the fields of kind gk that each cluster assigns itself, in the
// order they are listed in the documentation; nil for a kind with none.
func AssignedFields(gk schema.GroupKind) []AssignedField {
	switch gk {
	case gkService:
		return []AssignedField{
			{Path: "spec.clusterIP, spec.clusterIPs", When: `unless "None" (headless)`, keep: keepServiceIPs},
			{Path: "spec.ipFamilies", keep: keepServiceFamilies},
			{Path: "spec.ipFamilyPolicy", When: "when the source has the default, SingleStack", keep: keepServiceFamilyPolicy},
			{Path: "spec.ports[*].nodePort", When: "matched by port and protocol", keep: keepServiceNodePorts},
			{Path: "spec.healthCheckNodePort", keep: keepServiceHealthCheckNodePort},
		}
	case gkJob:
		return []AssignedField{
			{Path: "spec.selector", When: "unless spec.manualSelector", keep: keepJobSelector},
			{Path: "spec.template.metadata.labels[" + jobControllerUIDLabel + ", " + jobLegacyControllerUIDLabel + ", " + jobNameLabel + ", " + jobLegacyNameLabel + "]",
				When: "unless spec.manualSelector", keep: keepJobTemplateLabels},
		}
	case gkPVC:
		return []AssignedField{
			{Path: "spec.volumeName", keep: keepPath("spec", "volumeName")},
			{Path: "metadata.annotations[pv.kubernetes.io/*, volume.*kubernetes.io/*]", When: "the binding annotations", keep: keepAnnotations(pvcBindingAnnotations()...)},
		}
	case gkSA:
		return []AssignedField{{Path: "secrets", keep: keepPath("secrets")}}
	case gkPod:
		return []AssignedField{{Path: "spec.nodeName", keep: keepPath("spec", "nodeName")}}
	case gkDeployment:
		return []AssignedField{{Path: "metadata.annotations[" + deploymentRevision + "]", keep: keepAnnotations(deploymentRevision)}}
	case gkDaemonSet:
		return []AssignedField{{Path: "metadata.annotations[" + daemonSetTemplateGeneration + "]", keep: keepAnnotations(daemonSetTemplateGeneration)}}
	case gkNamespace:
		return []AssignedField{{Path: "spec.finalizers", keep: keepPath("spec", "finalizers")}}
	}
	return nil
}

// Kept is what the destination keeps of the copies of one rule and kind: the fields its
// cluster assigns, and the rule's ignoreFields. The zero Kept keeps nothing.
type Kept struct {
	assigned []AssignedField
	ignore   []rules.FieldPath
}

// KeptFor returns what the destination keeps of copies of kind gk written by a rule with
// the ignoreFields ignore.
func KeptFor(gk schema.GroupKind, ignore []rules.FieldPath) Kept {
	return Kept{assigned: AssignedFields(gk), ignore: ignore}
}

// Empty reports whether k keeps nothing.
func (k Kept) Empty() bool { return len(k.assigned) == 0 && len(k.ignore) == 0 }

// Localize returns a copy of desired with the destination's values at the kept fields:
// with observed nil (a new copy), without the fields clusters assign, and with the
// source's values of the ignoreFields; otherwise with observed's values of both. desired
// is not modified; it is returned as is when k keeps nothing.
func (k Kept) Localize(desired, observed *unstructured.Unstructured) *unstructured.Unstructured {
	if k.Empty() || desired == nil {
		return desired
	}
	out := desired.DeepCopy()
	var obs map[string]any
	if observed != nil {
		obs = observed.Object
	}
	for _, f := range k.assigned {
		f.keep(out.Object, obs)
	}
	if observed != nil {
		for _, p := range k.ignore {
			p.Keep(out.Object, obs)
		}
	}
	return out
}

// The helpers below read and write unstructured content: nested maps of JSON values.

// child returns m[key] as a map, or nil.
func child(m map[string]any, key string) map[string]any {
	if m == nil {
		return nil
	}
	c, _ := m[key].(map[string]any)
	return c
}

// nested returns the map at the keys below m, or nil.
func nested(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = child(m, k)
	}
	return m
}

// setOrDelete sets m[key] to a copy of v, or deletes it when v is nil.
func setOrDelete(m map[string]any, key string, v any) {
	if m == nil {
		return
	}
	if v == nil {
		delete(m, key)
		return
	}
	m[key] = runtime.DeepCopyJSONValue(v)
}

// keepPath keeps the value at the path (keys of objects).
func keepPath(keys ...string) func(d, o map[string]any) {
	parents, last := keys[:len(keys)-1], keys[len(keys)-1]
	return func(d, o map[string]any) {
		setOrDelete(nested(d, parents...), last, nested(o, parents...)[last])
	}
}

// keepMapKeys keeps the given keys of the string map at the path, creating it in desired
// when observed has one of the keys.
func keepMapKeys(d, o map[string]any, path []string, keys ...string) {
	om := nested(o, path...)
	dm := nested(d, path...)
	if dm == nil {
		found := false
		for _, k := range keys {
			if _, ok := om[k]; ok {
				found = true
			}
		}
		if !found {
			return
		}
		parent := d
		for _, p := range path {
			c := child(parent, p)
			if c == nil {
				c = map[string]any{}
				parent[p] = c
			}
			parent = c
		}
		dm = parent
	}
	for _, k := range keys {
		setOrDelete(dm, k, om[k])
	}
	if len(dm) == 0 {
		parent := nested(d, path[:len(path)-1]...)
		delete(parent, path[len(path)-1])
	}
}

// keepAnnotations keeps the given annotations.
func keepAnnotations(keys ...string) func(d, o map[string]any) {
	return func(d, o map[string]any) { keepMapKeys(d, o, []string{"metadata", "annotations"}, keys...) }
}

// Service.

func serviceType(spec map[string]any) string {
	if t, _ := spec["type"].(string); t != "" {
		return t
	}
	return "ClusterIP"
}

func headless(spec map[string]any) bool {
	ip, _ := spec["clusterIP"].(string)
	return ip == "None"
}

func keepServiceIPs(d, o map[string]any) {
	ds, os := child(d, "spec"), child(o, "spec")
	if ds == nil || serviceType(ds) == "ExternalName" || headless(ds) {
		return
	}
	if headless(os) {
		os = nil // the source left headless: the cluster allocates an address (or refuses the switch)
	}
	setOrDelete(ds, "clusterIP", os["clusterIP"])
	setOrDelete(ds, "clusterIPs", os["clusterIPs"])
}

func keepServiceFamilies(d, o map[string]any) {
	ds, os := child(d, "spec"), child(o, "spec")
	if ds == nil || serviceType(ds) == "ExternalName" {
		return
	}
	setOrDelete(ds, "ipFamilies", os["ipFamilies"])
}

func keepServiceFamilyPolicy(d, o map[string]any) {
	ds, os := child(d, "spec"), child(o, "spec")
	if ds == nil || serviceType(ds) == "ExternalName" {
		return
	}
	if p, _ := ds["ipFamilyPolicy"].(string); p != "" && p != "SingleStack" {
		return // chosen at the source: copied
	}
	setOrDelete(ds, "ipFamilyPolicy", os["ipFamilyPolicy"])
}

// portKey identifies a Service port: its number and protocol (unique in a Service).
func portKey(p map[string]any) string {
	proto, _ := p["protocol"].(string)
	if proto == "" {
		proto = "TCP"
	}
	switch n := p["port"].(type) {
	case int64:
		return proto + "/" + strconv.FormatInt(n, 10)
	case float64:
		return proto + "/" + strconv.FormatInt(int64(n), 10)
	}
	return ""
}

func keepServiceNodePorts(d, o map[string]any) {
	ds, os := child(d, "spec"), child(o, "spec")
	if ds == nil {
		return
	}
	dports, _ := ds["ports"].([]any)
	oports, _ := os["ports"].([]any)
	allocates := serviceType(ds) == "NodePort" || serviceType(ds) == "LoadBalancer"
	observed := map[string]any{}
	for _, p := range oports {
		if pm, ok := p.(map[string]any); ok {
			if np, ok := pm["nodePort"]; ok {
				observed[portKey(pm)] = np
			}
		}
	}
	for _, p := range dports {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if !allocates {
			delete(pm, "nodePort")
			continue
		}
		setOrDelete(pm, "nodePort", observed[portKey(pm)])
	}
}

func keepServiceHealthCheckNodePort(d, o map[string]any) {
	ds, os := child(d, "spec"), child(o, "spec")
	if ds == nil {
		return
	}
	if serviceType(ds) != "LoadBalancer" {
		delete(ds, "healthCheckNodePort")
		return
	}
	setOrDelete(ds, "healthCheckNodePort", os["healthCheckNodePort"])
}

// Job.

func manualSelector(spec map[string]any) bool {
	m, _ := spec["manualSelector"].(bool)
	return m
}

func keepJobSelector(d, o map[string]any) {
	ds := child(d, "spec")
	if ds == nil || manualSelector(ds) {
		return
	}
	setOrDelete(ds, "selector", child(o, "spec")["selector"])
}

func keepJobTemplateLabels(d, o map[string]any) {
	ds := child(d, "spec")
	if ds == nil || manualSelector(ds) {
		return
	}
	keepMapKeys(d, o, []string{"spec", "template", "metadata", "labels"},
		jobControllerUIDLabel, jobLegacyControllerUIDLabel, jobNameLabel, jobLegacyNameLabel)
}

// Equal reports whether k and o keep the same fields (go-cmp uses it too).
func (k Kept) Equal(o Kept) bool {
	if len(k.assigned) != len(o.assigned) || len(k.ignore) != len(o.ignore) {
		return false
	}
	for i := range k.assigned {
		if k.assigned[i].Path != o.assigned[i].Path {
			return false
		}
	}
	for i := range k.ignore {
		if k.ignore[i].String() != o.ignore[i].String() {
			return false
		}
	}
	return true
}
