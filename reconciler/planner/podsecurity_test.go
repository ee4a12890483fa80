package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// workload returns a copy of kind (apiVersion av) in namespace ns whose pod spec is
// spec, at the place its kind keeps its pod template.
func workload(av, kind, ns, spec string) string {
	meta := fmt.Sprintf(`metadata: {name: w, namespace: %s}`, ns)
	switch kind {
	case "Pod":
		return fmt.Sprintf(`{apiVersion: %s, kind: Pod, %s, spec: %s}`, av, meta, spec)
	case "PodTemplate":
		return fmt.Sprintf(`{apiVersion: %s, kind: PodTemplate, %s, template: {metadata: {labels: {app: a}}, spec: %s}}`, av, meta, spec)
	case "CronJob":
		return fmt.Sprintf(`{apiVersion: %s, kind: CronJob, %s, spec: {schedule: "* * * * *", jobTemplate: {spec: {template: {spec: %s}}}}}`, av, meta, spec)
	}
	return fmt.Sprintf(`{apiVersion: %s, kind: %s, %s, spec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: %s}}}`, av, kind, meta, spec)
}

func deployment(ns, spec string) string { return workload("apps/v1", "Deployment", ns, spec) }

const (
	cleanSpec      = `{containers: [{name: c, image: example.com/c:1}]}`
	privilegedSpec = `{containers: [{name: c, image: example.com/c:1, securityContext: {privileged: true}}]}`
	hostPIDSpec    = `{hostPID: true, containers: [{name: c, image: example.com/c:1}]}`
	// restrictedSpec meets the restricted level.
	restrictedSpec = `{securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}, containers: [{name: c, image: example.com/c:1,
		securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}`
)

// TestPodSecurity: the pod templates of copies are judged by the Pod Security Standards,
// at baseline by default, at the namespace's enforce label when it is stricter, at the
// level the SyncPolicies set; and the registry's namespaces take nothing but Secrets in
// the registry namespace.
func TestPodSecurity(t *testing.T) {
	privileged := v1alpha1.SyncPolicySpec{PodSecurity: "privileged"}
	restricted := v1alpha1.SyncPolicySpec{PodSecurity: "restricted"}
	allowRegistryNS := v1alpha1.SyncPolicySpec{Allow: []v1alpha1.PolicyAllow{{Namespaces: []string{"cluster-registry", "cluster-registry-readers"}}}}
	levels := map[string]string{"strict": "restricted", "base": "baseline", "open": "privileged", "typo": "restricetd"}
	for _, tc := range []struct {
		name       string
		policy     []v1alpha1.SyncPolicySpec
		copy       string
		wantReason string   // empty: allowed
		wantSays   []string // parts of the message
	}{
		// What baseline refuses, by default.
		{name: "a privileged container", copy: deployment("apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			`Deployment apps/w: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`,
			"the level here is baseline (the default: no SyncPolicy of this cluster sets spec.podSecurity)",
			"it needs a SyncPolicy with spec.podSecurity: privileged"}},
		{name: "hostPID", copy: deployment("apps", hostPIDSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			"host namespaces (hostPID=true)"}},
		{name: "hostNetwork", copy: deployment("apps", `{hostNetwork: true, containers: [{name: c, image: i}]}`), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			"host namespaces (hostNetwork=true)"}},
		{name: "a hostPath volume of /", copy: deployment("apps", `{volumes: [{name: root, hostPath: {path: /}}], containers: [{name: c, image: i, volumeMounts: [{name: root, mountPath: /host}]}]}`),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`hostPath volumes (volume "root")`}},
		{name: "added capabilities", copy: deployment("apps", `{containers: [{name: c, image: i, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]}`),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add)`}},
		{name: "several checks at once", copy: deployment("apps", `{hostPID: true, hostIPC: true, containers: [{name: c, image: i, securityContext: {privileged: true}}]}`),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`host namespaces (hostPID=true, hostIPC=true), privileged (container "c" must not set securityContext.privileged=true)`}},

		// Every kind that carries a pod template, found where the kind keeps it.
		{name: "a clean Deployment", copy: deployment("apps", cleanSpec)},
		{name: "a clean CronJob", copy: workload("batch/v1", "CronJob", "apps", cleanSpec)},
		{name: "a clean Pod", copy: workload("v1", "Pod", "apps", cleanSpec)},
		{name: "a privileged Pod", copy: workload("v1", "Pod", "apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"Pod apps/w: violates PodSecurity"}},
		{name: "a privileged PodTemplate", copy: workload("v1", "PodTemplate", "apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a privileged ReplicationController", copy: workload("v1", "ReplicationController", "apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a privileged ReplicaSet", copy: workload("apps/v1", "ReplicaSet", "apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a privileged StatefulSet", copy: workload("apps/v1", "StatefulSet", "apps", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a hostPID DaemonSet", copy: workload("apps/v1", "DaemonSet", "apps", hostPIDSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a hostPID Job", copy: workload("batch/v1", "Job", "apps", hostPIDSpec), wantReason: v1alpha1.ReasonPodSecurity},
		{name: "a hostPID CronJob", copy: workload("batch/v1", "CronJob", "apps", hostPIDSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			"CronJob apps/w: violates PodSecurity", "hostPID=true"}},
		// Custom resources: the pod specs they hold, wherever they are.
		{name: "a Deployment of another group is judged by the pod spec it holds", copy: workload("example.com/v1", "Deployment", "apps", privilegedSpec),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"Deployment apps/w (a pod spec at spec.template.spec)", `violates PodSecurity "baseline:latest": privileged`}},
		{name: "a rollout with a clean template", copy: workload("argoproj.io/v1alpha1", "Rollout", "apps", cleanSpec)},
		{name: "a custom resource with a host PID pod spec in a list", copy: `{apiVersion: example.com/v1, kind: Pipeline, metadata: {name: w, namespace: apps},
			spec: {stages: [{name: a, template: {spec: ` + cleanSpec + `}}, {name: b, template: {metadata: {labels: {app: b}}, spec: ` + hostPIDSpec + `}}]}}`,
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"a pod spec at spec.stages[1].template.spec", "host namespaces"}},
		{name: "a custom resource that is a pod spec itself", copy: `{apiVersion: example.com/v1, kind: Runner, metadata: {name: w, namespace: apps}, spec: ` + hostPIDSpec + `}`,
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"a pod spec at spec", "host namespaces"}},
		{name: "a custom resource whose containers are not a pod's", copy: `{apiVersion: example.com/v1, kind: Box, metadata: {name: w, namespace: apps}, spec: {containers: [{name: c, ports: "many"}]}}`,
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"a pod spec at spec", "cannot be read"}},
		{name: "a custom resource with a privileged pod spec, privileged granted", policy: []v1alpha1.SyncPolicySpec{privileged}, copy: workload("example.com/v1", "Deployment", "apps", privilegedSpec)},
		{name: "a custom resource without a pod spec", copy: `{apiVersion: example.com/v1, kind: Box, metadata: {name: w, namespace: apps}, spec: {containers: [a, b], items: [{x: 1}]}}`},
		{name: "a template that is not a pod spec", copy: deployment("apps", `{containers: "oops"}`), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			"its pod template cannot be read", "spec.template.spec", "never written"}},
		{name: "a template that is not an object", copy: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: w, namespace: apps}, spec: {template: [1]}}`,
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{"its pod template cannot be read"}},

		// The level: the namespace's label when stricter, the SyncPolicies'.
		{name: "restricted by the namespace's label", copy: deployment("strict", cleanSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			`violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`,
			"namespace strict is labelled pod-security.kubernetes.io/enforce=restricted",
			"it needs that label at baseline"}},
		{name: "meets restricted under the namespace's label", copy: deployment("strict", restrictedSpec)},
		{name: "an invalid label is restricted", copy: deployment("typo", cleanSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			`"restricted:latest"`, "enforce=restricetd"}},
		{name: "a privileged label does not loosen the default", copy: deployment("open", privilegedSpec), wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{
			`"baseline:latest"`, "it needs a SyncPolicy with spec.podSecurity: privileged"}},
		{name: "privileged granted by a SyncPolicy", policy: []v1alpha1.SyncPolicySpec{privileged}, copy: deployment("apps", privilegedSpec)},
		{name: "privileged granted, in a namespace labelled privileged", policy: []v1alpha1.SyncPolicySpec{privileged}, copy: deployment("open", hostPIDSpec)},
		{name: "privileged granted, but the namespace's label is baseline", policy: []v1alpha1.SyncPolicySpec{privileged}, copy: deployment("base", privilegedSpec),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`"baseline:latest"`, "namespace base is labelled pod-security.kubernetes.io/enforce=baseline", "it needs that label at privileged"}},
		{name: "the strictest SyncPolicy wins", policy: []v1alpha1.SyncPolicySpec{privileged, restricted}, copy: deployment("apps", privilegedSpec),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`"restricted:latest"`, "a SyncPolicy of this cluster sets spec.podSecurity: restricted",
				"it needs a SyncPolicy with spec.podSecurity: privileged (and none stricter)"}},
		{name: "restricted by a SyncPolicy", policy: []v1alpha1.SyncPolicySpec{restricted}, copy: deployment("apps", cleanSpec),
			wantReason: v1alpha1.ReasonPodSecurity, wantSays: []string{`"restricted:latest"`, "a SyncPolicy with spec.podSecurity: baseline"}},
		{name: "a ConfigMap is not judged", policy: []v1alpha1.SyncPolicySpec{restricted}, copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: strict}}`},

		// The registry's namespaces.
		{name: "a Deployment running as the controller in the registry namespace", policy: []v1alpha1.SyncPolicySpec{privileged, allowRegistryNS},
			copy:       deployment("cluster-registry", `{serviceAccountName: cluster-registry-controller, containers: [{name: c, image: i}]}`),
			wantReason: v1alpha1.ReasonCopyRefused, wantSays: []string{
				"Deployment cluster-registry/w: namespace cluster-registry is the registry's: a pod there would run as its ServiceAccounts (cluster-registry-controller holds the controller's token)",
				"no SyncPolicy can allow a Deployment there"}},
		{name: "a clean Pod in the registry namespace", copy: workload("v1", "Pod", "cluster-registry", cleanSpec), wantReason: v1alpha1.ReasonCopyRefused,
			wantSays: []string{"namespace cluster-registry is the registry's"}},
		{name: "a CronJob in the readers namespace", copy: workload("batch/v1", "CronJob", "cluster-registry-readers", cleanSpec), wantReason: v1alpha1.ReasonCopyRefused,
			wantSays: []string{"CronJob cluster-registry-readers/w: namespace cluster-registry-readers holds the registry's per-peer readers and its key: rules write nothing there, and no SyncPolicy can allow it"}},
		{name: "a Secret in the registry namespace (the seed's scenario)", copy: `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: test-secret, namespace: cluster-registry}}`},
		{name: "a Secret with a name of the registry's", copy: `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: cluster-registry-reader-for-x, namespace: cluster-registry}}`,
			wantReason: v1alpha1.ReasonCopyRefused, wantSays: []string{"the names cluster-registry-* in namespace cluster-registry are the registry's own"}},
		{name: "a Secret in the readers namespace", copy: `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: cluster-registry-key, namespace: cluster-registry-readers}}`,
			wantReason: v1alpha1.ReasonCopyRefused, wantSays: []string{"namespace cluster-registry-readers holds the registry's per-peer readers"}},
		{name: "a ConfigMap in the registry namespace", policy: []v1alpha1.SyncPolicySpec{allowRegistryNS}, copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: cluster-registry}}`,
			wantReason: v1alpha1.ReasonCopyRefused, wantSays: []string{"ConfigMap cluster-registry/c: namespace cluster-registry is the registry's: rules write nothing there but Secrets", "no SyncPolicy can allow a ConfigMap there"}},
		{name: "the registry's Namespace", copy: `{apiVersion: v1, kind: Namespace, metadata: {name: cluster-registry, labels: {pod-security.kubernetes.io/enforce: privileged}}}`,
			wantReason: v1alpha1.ReasonCopyRefused, wantSays: []string{"Namespace cluster-registry: the registry's own namespace is never written by rules"}},
		{name: "the readers' Namespace", copy: `{apiVersion: v1, kind: Namespace, metadata: {name: cluster-registry-readers}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "another Namespace", copy: `{apiVersion: v1, kind: Namespace, metadata: {name: cluster-registry-other}}`},
		{name: "a ConfigMap in a namespace named like the registry's", copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: cluster-registry-readers2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(tc.policy, v1alpha1.DefaultNamespace, []string{"east", "west"}).WithNamespaceLevels(levels)
			copy := fieldsObj(t, tc.copy)
			got := p.CheckCopy(copy, copy, "east", false)
			var reason, msg string
			if got != nil {
				reason, msg = got.Reason, got.Message
			}
			if diff := cmp.Diff(tc.wantReason, reason); diff != "" {
				t.Fatalf("reason (-want +got):\n%s\nmessage: %s", diff, msg)
			}
			for _, part := range tc.wantSays {
				if !strings.Contains(msg, part) {
					t.Errorf("the message does not say %q:\n%s", part, msg)
				}
			}
		})
	}
}

// TestPodSecurityNoAllocation: CheckCopy's new checks cost nothing for kinds without a
// pod template outside the registry's namespaces (the hot path syncs ConfigMaps).
func TestPodSecurityNoAllocation(t *testing.T) {
	p := NewPolicy(nil, v1alpha1.DefaultNamespace, nil).WithNamespaceLevels(map[string]string{"apps": "restricted"})
	for _, y := range []string{
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}, data: {k: v}}`,
		`{apiVersion: example.com/v1, kind: Box, metadata: {name: w, namespace: apps}, spec: {containers: [a, b], items: [{x: 1}, {y: {z: [1, 2]}}]}}`,
	} {
		obj := fieldsObj(t, y)
		gk := obj.GroupVersionKind().GroupKind()
		if n := testing.AllocsPerRun(100, func() {
			if p.checkRegistryNamespaces(gk, obj, "what") != nil || p.checkPodSecurity(gk, obj, "what") != nil {
				t.Fatalf("%s is refused", gk.Kind)
			}
		}); n != 0 {
			t.Errorf("%v allocations per %s, want 0", n, gk.Kind)
		}
	}
}
