package kinds

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// The clusters: c1 holds the rules and the originals, c2 and c3 the copies.
const (
	c1 = "c1"
	c2 = "c2"
	c3 = "c3"
)

const (
	// namespace holds every original and copy; the test creates it on each cluster.
	namespace = "kinds"
	// presentTimeout bounds the wait for every copy, and for a change to reach them.
	presentTimeout = 60 * time.Second
	// steadyWindow is how long no controller may write once every copy is present (the
	// acceptance of issue 14).
	steadyWindow = 60 * time.Second
	// settleGrace is how long the changes of the update and hand-edit phases get to
	// settle before the second steady-state window.
	settleGrace = 15 * time.Second
	// pollInterval is how often a wait asks the API servers again.
	pollInterval = 250 * time.Millisecond
	// writesMetric counts each controller's successful writes of copies, by rule and op;
	// errorsMetric its failed reconciles (a rejected write among them), by kind.
	writesMetric = "kubectl_registry_sync_writes_total"
	errorsMetric = "kubectl_registry_sync_errors_total"
)

// peers are the clusters that get copies.
func peers() []string { return []string{c2, c3} }

var bed *testbed.Bed

func TestMain(m *testing.M) {
	opts := harness.RealisticBedOptions(c1, c2, c3)
	opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, "testdata/crds")
	os.Exit(testbed.Main(m, opts, &bed))
}

// kindCase is one original on c1 and the rule that syncs it.
type kindCase struct {
	// name names the subtests, the original and (prefixed with "kinds-") its rule.
	name string
	// resource is the plural the peers' reader role must grant.
	resource string
	// original is the object's YAML, without name and namespace.
	original string
}

// cases are the kinds of the battery, one original each.
func cases() []kindCase {
	return []kindCase{
		{name: "configmap", resource: "configmaps", original: `
apiVersion: v1
kind: ConfigMap
data: {color: blue, size: "3"}`},
		{name: "secret", resource: "secrets", original: `
apiVersion: v1
kind: Secret
type: Opaque
data: {password: c2VjcmV0}`},
		{name: "serviceaccount", resource: "serviceaccounts", original: `
apiVersion: v1
kind: ServiceAccount`},
		{name: "svc-clusterip", resource: "services", original: `
apiVersion: v1
kind: Service
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]`},
		{name: "svc-headless", resource: "services", original: `
apiVersion: v1
kind: Service
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: db, port: 5432}]`},
		{name: "svc-nodeport", resource: "services", original: `
apiVersion: v1
kind: Service
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80}, {name: https, port: 443}]`},
		{name: "deployment", resource: "deployments", original: `
apiVersion: apps/v1
kind: Deployment
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "example.com/web:1"}]}`},
		{name: "statefulset", resource: "statefulsets", original: `
apiVersion: apps/v1
kind: StatefulSet
spec:
  serviceName: svc-headless
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "example.com/db:1"}]}`},
		{name: "daemonset", resource: "daemonsets", original: `
apiVersion: apps/v1
kind: DaemonSet
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "example.com/agent:1"}]}`},
		{name: "job", resource: "jobs", original: `
apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: task, image: "example.com/task:1"}]`},
		{name: "cronjob", resource: "cronjobs", original: `
apiVersion: batch/v1
kind: CronJob
spec:
  schedule: "*/1 * * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: task, image: "example.com/task:1"}]`},
		{name: "ingress", resource: "ingresses", original: `
apiVersion: networking.k8s.io/v1
kind: Ingress
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: svc-clusterip, port: {number: 80}}}`},
		{name: "networkpolicy", resource: "networkpolicies", original: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {app: client}}}]}]`},
		{name: "pvc", resource: "persistentvolumeclaims", original: `
apiVersion: v1
kind: PersistentVolumeClaim
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}`},
		{name: "pdb", resource: "poddisruptionbudgets", original: `
apiVersion: policy/v1
kind: PodDisruptionBudget
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}`},
		{name: "hpa", resource: "horizontalpodautoscalers", original: `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: deployment}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}`},
		{name: "role", resource: "roles", original: `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]`},
		{name: "rolebinding", resource: "rolebindings", original: `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: role}
subjects: [{kind: ServiceAccount, name: serviceaccount, namespace: kinds}]`},
		{name: "gizmo", resource: "gizmos", original: `
apiVersion: kinds.example.com/v1
kind: Gizmo
spec: {size: 1, color: blue}`},
	}
}

// object returns the case's original as an unstructured object with its name and
// namespace.
func (k kindCase) object(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(k.original), &u.Object); err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
	u.SetName(k.name)
	u.SetNamespace(namespace)
	return u
}

// rule returns the ResourceSyncRule that syncs the case's original, and nothing else.
func (k kindCase) rule(t *testing.T) *v1alpha1.ResourceSyncRule {
	t.Helper()
	gvk := k.object(t).GroupVersionKind()
	return &v1alpha1.ResourceSyncRule{
		ObjectMeta: metav1.ObjectMeta{Name: ruleName(k.name)},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK: v1alpha1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{
				ObjectKey: v1alpha1.ObjectKey{Name: k.name, Namespace: namespace},
			}}}},
		},
	}
}

func ruleName(name string) string { return "kinds-" + name }

// TestKinds is the battery. Its phases run in order on one group (the controllers keep
// running from one to the next); within a phase every kind has its own subtest.
func TestKinds(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	cls, metricsURLs := harness.FormGroupWithMetrics(t, bed, c1, c2, c3)
	ks := cases()
	setUp(t, cls, ks)

	t.Run("every copy is present", func(t *testing.T) {
		for _, k := range ks {
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				if err := wait(t.Context(), presentTimeout, func(ctx context.Context) error { return copiesPresent(ctx, cls, k) }); err != nil {
					t.Errorf("%v\n%s", err, ruleStatuses(cls, ruleName(k.name)))
				}
			})
		}
	})

	// A controller of each cluster (played here by the test) reports on its Gizmo; c3
	// leaves its copy's status empty. Nobody may copy or overwrite these statuses.
	for _, c := range []string{c1, c2} {
		if err := setGizmoPhase(t.Context(), cls[c], gizmoPhase(c)); err != nil {
			t.Errorf("writing the Gizmo status on %s: %v", c, err)
		}
	}
	// What each cluster assigned itself, as first seen: it must never change.
	assigned := assignedFields(t.Context(), cls)
	t.Run("destination-assigned fields are the destination's own", func(t *testing.T) {
		for _, tt := range assignedChecks() {
			t.Run(tt.name, func(t *testing.T) {
				for _, c := range []string{c1, c2, c3} {
					if err := tt.check(t.Context(), cls, c); err != nil {
						t.Errorf("on %s: %v", c, err)
					}
				}
			})
		}
	})

	t.Run("no controller writes in steady state", func(t *testing.T) {
		noWrites(t, cls, metricsURLs, ks)
	})

	t.Run("an update at the origin reaches every copy", func(t *testing.T) {
		for _, tt := range originUpdates() {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				if err := patch(t.Context(), cls[c1], tt.object, tt.patch); err != nil {
					t.Fatal(err)
				}
				err := wait(t.Context(), presentTimeout, func(ctx context.Context) error {
					for _, c := range peers() {
						if err := tt.want(ctx, cls[c]); err != nil {
							return fmt.Errorf("on %s: %w", c, err)
						}
					}
					return nil
				})
				if err != nil {
					t.Errorf("%v\n%s", err, ruleStatuses(cls, ruleName(tt.object)))
				}
			})
		}
	})

	t.Run("a hand edit of a copy is reverted", func(t *testing.T) {
		for _, tt := range handEdits() {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				if err := patch(t.Context(), cls[c2], tt.object, tt.patch); err != nil {
					t.Fatal(err)
				}
				if err := wait(t.Context(), presentTimeout, func(ctx context.Context) error { return tt.want(ctx, cls[c2]) }); err != nil {
					t.Errorf("%v\n%s", err, ruleStatuses(cls, ruleName(tt.object)))
				}
			})
		}
	})

	t.Run("the controllers settle again after the changes", func(t *testing.T) {
		time.Sleep(settleGrace)
		noWrites(t, cls, metricsURLs, ks)
	})

	t.Run("destination-assigned fields never changed", func(t *testing.T) {
		if diff := cmp.Diff(assigned, assignedFields(t.Context(), cls)); diff != "" {
			t.Errorf("destination-assigned fields changed during the test (-first seen +now):\n%s", diff)
		}
	})
}

// noWrites reads every controller's write and error counters, waits steadyWindow and
// reads them again; every kind has a subtest that fails when one of its counters moved.
func noWrites(t *testing.T, cls map[string]client.Client, metricsURLs map[string]harness.Metrics, ks []kindCase) {
	t.Helper()
	before := counters(t, metricsURLs, ks)
	time.Sleep(steadyWindow)
	after := counters(t, metricsURLs, ks)
	for _, k := range ks {
		t.Run(k.name, func(t *testing.T) {
			// The counters must count: a copy that is there was written at least once.
			for _, c := range peers() {
				key := counterKey{cluster: c, metric: writesMetric, label: counterLabel(t, k, writesMetric)}
				if _, err := get(t.Context(), cls[c], k.name); err == nil && before[key] == 0 {
					t.Errorf("%s has a copy but its controller's %s{%s} is 0: the test reads the wrong counter", c, writesMetric, key.label)
				}
			}
			for _, c := range []string{c1, c2, c3} {
				for _, m := range []string{writesMetric, errorsMetric} {
					key := counterKey{cluster: c, metric: m, label: counterLabel(t, k, m)}
					if d := after[key] - before[key]; d != 0 {
						t.Errorf("the controller of %s counted %v more %s{%s} within %s", c, d, m, key.label, steadyWindow)
					}
				}
			}
			if t.Failed() {
				t.Log(ruleStatuses(cls, ruleName(k.name)))
			}
		})
	}
}

// setUp grants the peers' readers the battery's kinds, creates the namespace on every
// cluster, then the rules and the originals on c1.
func setUp(t *testing.T, cls map[string]client.Client, ks []kindCase) {
	t.Helper()
	ctx := t.Context()
	var rules []rbacv1.PolicyRule
	byGroup := map[string][]string{}
	for _, k := range ks {
		g := k.object(t).GroupVersionKind().Group
		byGroup[g] = append(byGroup[g], k.resource)
	}
	for g, res := range byGroup {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: res})
	}
	for _, name := range []string{c1, c2, c3} {
		cl := cls[name]
		for label, verbs := range map[string][]string{
			v1alpha1.ReaderAggregatedLabel:     {"get", "list", "watch"},
			v1alpha1.ControllerAggregatedLabel: {"get", "list", "watch", "create", "update", "patch", "delete"},
		} {
			role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
				Name:   "kinds-battery-" + strings.Split(label, "/")[1],
				Labels: map[string]string{label: "true"},
			}}
			for _, r := range rules {
				r.Verbs = verbs
				role.Rules = append(role.Rules, r)
			}
			if label == v1alpha1.ControllerAggregatedLabel {
				// The members' identities write the copies' status too, and the namespaces
				// of rules with createNamespaces (harness.Grant).
				for _, r := range rules {
					status := rbacv1.PolicyRule{APIGroups: r.APIGroups, Verbs: []string{"get", "update", "patch"}}
					for _, res := range r.Resources {
						status.Resources = append(status.Resources, res+"/status")
					}
					role.Rules = append(role.Rules, status)
				}
				role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}})
			}
			if err := cl.Create(ctx, role); err != nil {
				t.Fatalf("%s: creating ClusterRole %s: %v", name, role.Name, err)
			}
		}
		harness.Eventually(t, 30*time.Second, "the members' role aggregates the battery's kinds on "+name, func() error {
			return harness.Aggregated(cl, v1alpha1.ControllerAggregatedRoleName, "kinds.example.com", "gizmos")
		})
		harness.Eventually(t, 30*time.Second, "the reader role aggregates the battery's kinds on "+name, func() error {
			var agg rbacv1.ClusterRole
			if err := cl.Get(ctx, client.ObjectKey{Name: v1alpha1.ReaderAggregatedRoleName}, &agg); err != nil {
				return err
			}
			for _, r := range agg.Rules {
				if len(r.Resources) > 0 && r.Resources[0] == "gizmos" {
					return nil
				}
			}
			return errors.New("no rule for gizmos yet")
		})
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
			t.Fatalf("%s: creating namespace %s: %v", name, namespace, err)
		}
		// RBAC grants power: each cluster consents to Roles and RoleBindings in the
		// battery's namespace, as its platform team would in Git.
		policy := &v1alpha1.SyncPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "kinds-battery"},
			Spec: v1alpha1.SyncPolicySpec{Allow: []v1alpha1.PolicyAllow{{
				Kinds: []v1alpha1.GroupKind{
					{Group: rbacv1.GroupName, Kind: "Role"},
					{Group: rbacv1.GroupName, Kind: "RoleBinding"},
				},
				Namespaces: []string{namespace},
			}}},
		}
		if err := cl.Create(ctx, policy); err != nil {
			t.Fatalf("%s: creating SyncPolicy %s: %v", name, policy.Name, err)
		}
	}
	for _, k := range ks {
		if err := cls[c1].Create(ctx, k.rule(t)); err != nil {
			t.Fatalf("creating rule %s: %v", ruleName(k.name), err)
		}
		if err := cls[c1].Create(ctx, k.object(t)); err != nil {
			t.Fatalf("creating %s on %s: %v", k.name, c1, err)
		}
	}
}

// wait calls f every pollInterval until it returns nil, or returns its last error after
// timeout.
func wait(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-time.After(pollInterval):
		}
	}
}

// get reads the object of case name (of the case's kind) from cl.
func get(ctx context.Context, cl client.Client, name string) (*unstructured.Unstructured, error) {
	var k kindCase
	for _, c := range cases() {
		if c.name == name {
			k = c
		}
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(k.original), &u.Object); err != nil {
		return nil, fmt.Errorf("case %q: %w", name, err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, got); err != nil {
		return nil, fmt.Errorf("getting %s %s: %w", u.GetKind(), name, err)
	}
	return got, nil
}

// copiesPresent fails unless c2 and c3 have a copy of the case's original marked as
// coming from c1.
func copiesPresent(ctx context.Context, cls map[string]client.Client, k kindCase) error {
	origin, err := get(ctx, cls[c1], k.name)
	if err != nil {
		return fmt.Errorf("the original on %s: %w", c1, err)
	}
	c1ID, err := bed.Cluster(c1).KubeSystemUID(ctx)
	if err != nil {
		return err
	}
	for _, c := range peers() {
		cp, err := get(ctx, cls[c], k.name)
		if err != nil {
			return fmt.Errorf("on %s: %w", c, err)
		}
		if cp.GetUID() == origin.GetUID() {
			return fmt.Errorf("on %s: the copy has the original's UID", c)
		}
		if got := cp.GetAnnotations()[v1alpha1.OwnershipAnnotation]; got != string(c1ID) {
			return fmt.Errorf("on %s: %s is %q, want %s's ID %s", c, v1alpha1.OwnershipAnnotation, got, c1, c1ID)
		}
	}
	return nil
}

// ruleStatuses describes the status of the rule on every cluster, for a failure message.
func ruleStatuses(cls map[string]client.Client, name string) string {
	var b strings.Builder
	for _, c := range []string{c1, c2, c3} {
		var r v1alpha1.ResourceSyncRule
		if err := cls[c].Get(context.Background(), client.ObjectKey{Name: name}, &r); err != nil {
			fmt.Fprintf(&b, "rule %s on %s: %v\n", name, c, err)
			continue
		}
		fmt.Fprintf(&b, "rule %s on %s: syncedObjects=%d conflicts=%d\n", name, c, r.Status.SyncedObjects, r.Status.Conflicts)
		for _, cond := range r.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, s := range r.Status.Sources {
			fmt.Fprintf(&b, "  source %s: %s (%d objects) %s\n", s.Cluster, s.State, s.Objects, s.Message)
		}
	}
	return b.String()
}

// counterKey names one counter of one controller: the sum of metric's samples with label.
type counterKey struct{ cluster, metric, label string }

// counterLabel is the label that selects the case's samples of metric: its rule for
// writes, its kind for errors.
func counterLabel(t *testing.T, k kindCase, metric string) string {
	if metric == writesMetric {
		return fmt.Sprintf("rule=%q", ruleName(k.name))
	}
	return fmt.Sprintf("kind=%q", k.object(t).GetKind())
}

// counters reads every case's write and error counters from every controller.
func counters(t *testing.T, urls map[string]harness.Metrics, ks []kindCase) map[counterKey]float64 {
	t.Helper()
	out := map[counterKey]float64{}
	for _, c := range []string{c1, c2, c3} {
		for _, k := range ks {
			for _, m := range []string{writesMetric, errorsMetric} {
				key := counterKey{cluster: c, metric: m, label: counterLabel(t, k, m)}
				v, err := harness.MetricSum(urls[c], m, key.label)
				if err != nil {
					t.Fatalf("reading the metrics of %s: %v", c, err)
				}
				out[key] = v
			}
		}
	}
	return out
}

// assignedCheck checks the fields one cluster assigned itself on one object.
type assignedCheck struct {
	name  string
	check func(ctx context.Context, cls map[string]client.Client, cluster string) error
}

// assignedChecks are the checks that each cluster's destination-assigned fields are its
// own: allocated from its ranges, generated from its object's UID.
func assignedChecks() []assignedCheck {
	return []assignedCheck{
		{"Service ClusterIP: clusterIP from the cluster's own range", func(ctx context.Context, cls map[string]client.Client, c string) error {
			svc, err := service(ctx, cls[c], "svc-clusterip")
			if err != nil {
				return err
			}
			cidr := bed.Cluster(c).ServiceCIDR()
			for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
				ip, err := netip.ParseAddr(s)
				if err != nil || !cidr.Contains(ip) {
					return fmt.Errorf("clusterIP %q is not in %s", s, cidr)
				}
			}
			return nil
		}},
		{"Service headless: clusterIP None", func(ctx context.Context, cls map[string]client.Client, c string) error {
			svc, err := service(ctx, cls[c], "svc-headless")
			if err != nil {
				return err
			}
			if svc.Spec.ClusterIP != corev1.ClusterIPNone {
				return fmt.Errorf("clusterIP %q, want None", svc.Spec.ClusterIP)
			}
			return nil
		}},
		{"Service NodePort: nodePorts from the cluster's own range", func(ctx context.Context, cls map[string]client.Client, c string) error {
			svc, err := service(ctx, cls[c], "svc-nodeport")
			if err != nil {
				return err
			}
			first, last := bed.Cluster(c).NodePortRange()
			cidr := bed.Cluster(c).ServiceCIDR()
			if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !cidr.Contains(ip) {
				return fmt.Errorf("clusterIP %q is not in %s", svc.Spec.ClusterIP, cidr)
			}
			for _, p := range svc.Spec.Ports {
				if p.NodePort < first || p.NodePort > last {
					return fmt.Errorf("port %s has nodePort %d, not in %d-%d", p.Name, p.NodePort, first, last)
				}
			}
			return nil
		}},
		{"Gizmo: status is the cluster's own", func(ctx context.Context, cls map[string]client.Client, c string) error {
			u, err := get(ctx, cls[c], "gizmo")
			if err != nil {
				return err
			}
			got, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			if want := gizmoPhase(c); got != want {
				return fmt.Errorf("status.phase %q, want %q", got, want)
			}
			return nil
		}},
		{"Job: selector and controller-uid label generated for the cluster's own Job", func(ctx context.Context, cls map[string]client.Client, c string) error {
			j, err := get(ctx, cls[c], "job")
			if err != nil {
				return err
			}
			uid := string(j.GetUID())
			sel, _, _ := unstructured.NestedStringMap(j.Object, "spec", "selector", "matchLabels")
			tmpl, _, _ := unstructured.NestedStringMap(j.Object, "spec", "template", "metadata", "labels")
			// The API server generates the selector on the new label, the Pod template
			// labels on the new and the legacy one.
			for _, want := range []struct {
				what   string
				labels map[string]string
				key    string
			}{
				{"spec.selector.matchLabels", sel, batchv1.ControllerUidLabel},
				{"spec.template.metadata.labels", tmpl, batchv1.ControllerUidLabel},
				{"spec.template.metadata.labels", tmpl, legacyControllerUIDLabel},
			} {
				if got := want.labels[want.key]; got != uid {
					return fmt.Errorf("%s[%s] is %q, want this Job's UID %s", want.what, want.key, got, uid)
				}
			}
			return nil
		}},
	}
}

// gizmoPhase is the status.phase the test writes on cluster c's Gizmo: its own on c1
// (the original) and c2 (a copy), none on c3.
func gizmoPhase(c string) string {
	if c == c3 {
		return ""
	}
	return "Ready-on-" + c
}

// setGizmoPhase writes status.phase on the Gizmo of cl through the status subresource.
func setGizmoPhase(ctx context.Context, cl client.Client, phase string) error {
	// A copy's status is written by the registry's controller too: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		u, err := get(ctx, cl, "gizmo")
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, phase, "status", "phase"); err != nil {
			return err
		}
		return cl.Status().Update(ctx, u)
	})
	if err != nil {
		return fmt.Errorf("updating the status of Gizmo gizmo: %w", err)
	}
	return nil
}

// legacyControllerUIDLabel is the unprefixed label the API server still puts, besides
// batchv1.ControllerUidLabel, on a Job's Pod template.
const legacyControllerUIDLabel = "controller-uid"

// service reads the Service of case name from cl.
func service(ctx context.Context, cl client.Client, name string) (*corev1.Service, error) {
	var svc corev1.Service
	if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		return nil, fmt.Errorf("getting Service %s: %w", name, err)
	}
	return &svc, nil
}

// assignedFields reads, on every cluster, the fields the cluster assigns itself: the
// Services' clusterIPs and nodePorts and the Job's selector. A missing object reads as
// its error.
func assignedFields(ctx context.Context, cls map[string]client.Client) map[string]string {
	out := map[string]string{}
	for _, c := range []string{c1, c2, c3} {
		for _, name := range []string{"svc-clusterip", "svc-headless", "svc-nodeport"} {
			svc, err := service(ctx, cls[c], name)
			if err != nil {
				out[c+" "+name] = "error: " + reason(err)
				continue
			}
			out[c+" "+name+" clusterIPs"] = strings.Join(svc.Spec.ClusterIPs, ",")
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					out[fmt.Sprintf("%s %s nodePort %s", c, name, p.Name)] = fmt.Sprint(p.NodePort)
				}
			}
		}
		if g, err := get(ctx, cls[c], "gizmo"); err != nil {
			out[c+" gizmo"] = "error: " + reason(err)
		} else {
			phase, _, _ := unstructured.NestedString(g.Object, "status", "phase")
			out[c+" gizmo status.phase"] = phase
		}
		j, err := get(ctx, cls[c], "job")
		if err != nil {
			out[c+" job"] = "error: " + reason(err)
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(j.Object, "spec", "selector", "matchLabels")
		keys := make([]string, 0, len(sel))
		for k, v := range sel {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out[c+" job selector"] = strings.Join(keys, ",")
		out[c+" job uid"] = string(j.GetUID())
	}
	return out
}

// reason shortens an API error to its reason, so that a missing object compares equal
// from one read to the next.
func reason(err error) string {
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return string(r)
	}
	return err.Error()
}

// change is a patch of one object and what every cluster it concerns must then show.
type change struct {
	name   string
	object string // the case name of the object
	patch  client.Patch
	want   func(ctx context.Context, cl client.Client) error
}

// patch applies p to the object of case name on cl.
func patch(ctx context.Context, cl client.Client, name string, p client.Patch) error {
	u, err := get(ctx, cl, name)
	if err != nil {
		return err
	}
	if err := cl.Patch(ctx, u, p); err != nil {
		return fmt.Errorf("patching %s %s: %w", u.GetKind(), name, err)
	}
	return nil
}

func jsonPatch(s string) client.Patch  { return client.RawPatch(types.JSONPatchType, []byte(s)) }
func mergePatch(s string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(s)) }

// fieldIs returns a check that the object of case name has want at path.
func fieldIs(name string, want any, path ...string) func(ctx context.Context, cl client.Client) error {
	return func(ctx context.Context, cl client.Client) error {
		u, err := get(ctx, cl, name)
		if err != nil {
			return err
		}
		got, err := nested(u.Object, path...)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("%s %s (-want +got):\n%s", name, strings.Join(path, "."), diff)
		}
		return nil
	}
}

// nested returns the value at path, where a numeric element indexes a list.
func nested(obj any, path ...string) (any, error) {
	v := obj
	for i, p := range path {
		switch cur := v.(type) {
		case map[string]any:
			v = cur[p]
		case []any:
			var n int
			if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 0 || n >= len(cur) {
				return nil, fmt.Errorf("no element %s at %s", p, strings.Join(path[:i], "."))
			}
			v = cur[n]
		default:
			return nil, fmt.Errorf("nothing at %s", strings.Join(path[:i+1], "."))
		}
	}
	return v, nil
}

// originUpdates are the changes made to originals on c1 that must reach c2 and c3.
func originUpdates() []change {
	return []change{
		{
			name: "Deployment image", object: "deployment",
			patch: jsonPatch(`[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "example.com/web:2"}]`),
			want:  fieldIs("deployment", "example.com/web:2", "spec", "template", "spec", "containers", "0", "image"),
		},
		{
			name: "Service ClusterIP port", object: "svc-clusterip",
			patch: jsonPatch(`[{"op": "replace", "path": "/spec/ports/0/port", "value": 8081}]`),
			want:  fieldIs("svc-clusterip", int64(8081), "spec", "ports", "0", "port"),
		},
		{
			name: "Service NodePort port", object: "svc-nodeport",
			patch: jsonPatch(`[{"op": "replace", "path": "/spec/ports/1/port", "value": 8443}]`),
			want:  fieldIs("svc-nodeport", int64(8443), "spec", "ports", "1", "port"),
		},
		{
			name: "ConfigMap data key", object: "configmap",
			patch: mergePatch(`{"data": {"color": "green"}}`),
			want:  fieldIs("configmap", "green", "data", "color"),
		},
		{
			name: "Job label", object: "job",
			patch: mergePatch(`{"metadata": {"labels": {"tier": "batch"}}}`),
			want:  fieldIs("job", "batch", "metadata", "labels", "tier"),
		},
	}
}

// handEdits are changes made by hand to copies on c2 that the controller of c2 must
// revert to the origin's values (after originUpdates).
func handEdits() []change {
	return []change{
		{
			name: "ConfigMap data key", object: "configmap",
			patch: mergePatch(`{"data": {"color": "red"}}`),
			want:  fieldIs("configmap", "green", "data", "color"),
		},
		{
			name: "Deployment image", object: "deployment",
			patch: jsonPatch(`[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "example.com/web:hacked"}]`),
			want:  fieldIs("deployment", "example.com/web:2", "spec", "template", "spec", "containers", "0", "image"),
		},
		{
			name: "Gizmo spec field", object: "gizmo",
			patch: mergePatch(`{"spec": {"size": 7}}`),
			want:  fieldIs("gizmo", int64(1), "spec", "size"),
		},
	}
}
