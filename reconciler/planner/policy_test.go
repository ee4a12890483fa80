package planner

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// TestCheckCopy: what a rule from any member may never write here, what needs this
// cluster's SyncPolicy, and what the default policy accepts (the seed's scenarios).
func TestCheckCopy(t *testing.T) {
	rbacAllowed := v1alpha1.SyncPolicySpec{Allow: []v1alpha1.PolicyAllow{{
		Kinds: []v1alpha1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}}, Namespaces: []string{"team-a"}, FromClusters: []string{"east"}}}}
	kubeSystemCM := v1alpha1.SyncPolicySpec{Allow: []v1alpha1.PolicyAllow{{
		Kinds: []v1alpha1.GroupKind{{Kind: "ConfigMap"}}, Namespaces: []string{"kube-system"}}}}
	onlyEast := v1alpha1.SyncPolicySpec{FromClusters: []string{"east"}}
	const opaque = `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: s, namespace: apps}}`
	for _, tc := range []struct {
		name         string
		policy       []v1alpha1.SyncPolicySpec
		source, copy string
		origin       string
		wantReason   string // empty: allowed
		wantNeeds    string
	}{
		{name: "an Opaque Secret (the seed's scenario)", source: opaque, copy: opaque},
		{name: "a Secret in the registry namespace that is not the registry's", source: opaque,
			copy: `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: test-secret, namespace: cluster-registry}}`},
		{name: "a ConfigMap", source: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}`},
		{name: "an Opaque Secret turned into a service account token", source: opaque,
			copy: `{apiVersion: v1, kind: Secret, type: kubernetes.io/service-account-token, metadata: {name: s, namespace: apps,
				annotations: {kubernetes.io/service-account.name: cluster-registry-controller}}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a service account token as it is", source: `{apiVersion: v1, kind: Secret, type: kubernetes.io/service-account-token, metadata: {name: s, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: Secret, type: kubernetes.io/service-account-token, metadata: {name: s, namespace: apps}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a bootstrap token", source: `{apiVersion: v1, kind: Secret, type: bootstrap.kubernetes.io/token, metadata: {name: s, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: Secret, type: bootstrap.kubernetes.io/token, metadata: {name: s, namespace: apps}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a reader kubeconfig Secret", source: `{apiVersion: v1, kind: Secret, type: k8s.cisco.com/cluster-registry-secret, metadata: {name: s, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: Secret, type: k8s.cisco.com/cluster-registry-secret, metadata: {name: s, namespace: apps}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a rule with the built-in rule's reserved name",
			source: `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: core-resourcesyncrules}}`,
			copy:   `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: core-resourcesyncrules}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a rule", source: `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: web}}`,
			copy: `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: ResourceSyncRule, metadata: {name: web}}`},
		{name: "overwriting a member's reader Secret by name", source: opaque,
			copy: `{apiVersion: v1, kind: Secret, type: Opaque, metadata: {name: west, namespace: cluster-registry}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a Cluster", source: `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: Cluster, metadata: {name: west}}`,
			copy: `{apiVersion: clusterregistry.k8s.cisco.com/v1alpha1, kind: Cluster, metadata: {name: west}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "the controller's ServiceAccount", source: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: x, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: ServiceAccount, metadata: {name: cluster-registry-controller, namespace: cluster-registry}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "the leader election Lease", source: `{apiVersion: coordination.k8s.io/v1, kind: Lease, metadata: {name: x, namespace: cluster-registry}}`,
			copy: `{apiVersion: coordination.k8s.io/v1, kind: Lease, metadata: {name: x, namespace: cluster-registry}}`, wantReason: v1alpha1.ReasonCopyRefused},
		{name: "a copy into kube-system", source: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: kube-system}}`, wantReason: v1alpha1.ReasonNotAllowed, wantNeeds: "namespaces: [kube-system]"},
		{name: "a copy into kube-system, allowed", policy: []v1alpha1.SyncPolicySpec{kubeSystemCM}, source: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}`,
			copy: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: kube-system}}`},
		{name: "a ClusterRoleBinding", source: `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b}}`,
			copy: `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: b}}`, wantReason: v1alpha1.ReasonNotAllowed,
			wantNeeds: "kinds: [{group: rbac.authorization.k8s.io, kind: ClusterRoleBinding}]"},
		{name: "a MutatingWebhookConfiguration", source: `{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingWebhookConfiguration, metadata: {name: w}}`,
			copy: `{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingWebhookConfiguration, metadata: {name: w}}`, wantReason: v1alpha1.ReasonNotAllowed},
		{name: "a RoleBinding the policy allows", policy: []v1alpha1.SyncPolicySpec{rbacAllowed}, origin: "east",
			source: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-a}}`,
			copy:   `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-a}}`},
		{name: "a RoleBinding in another namespace than the policy's", policy: []v1alpha1.SyncPolicySpec{rbacAllowed}, origin: "east",
			source: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-b}}`,
			copy:   `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-b}}`, wantReason: v1alpha1.ReasonNotAllowed},
		{name: "a RoleBinding from another origin than the policy's", policy: []v1alpha1.SyncPolicySpec{rbacAllowed}, origin: "west",
			source: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-a}}`,
			copy:   `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: team-a}}`, wantReason: v1alpha1.ReasonNotAllowed},
		{name: "an origin outside spec.fromClusters", policy: []v1alpha1.SyncPolicySpec{onlyEast}, origin: "west", source: opaque, copy: opaque,
			wantReason: v1alpha1.ReasonNotAllowed, wantNeeds: "fromClusters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(tc.policy, v1alpha1.DefaultNamespace, []string{"east", "west"})
			origin := tc.origin
			if origin == "" {
				origin = "east"
			}
			got := p.CheckCopy(fieldsObj(t, tc.source), fieldsObj(t, tc.copy), origin, false)
			switch {
			case tc.wantReason == "" && got != nil:
				t.Fatalf("refused: %s", got.Message)
			case tc.wantReason != "" && got == nil:
				t.Fatal("allowed, want it refused")
			case got != nil && got.Reason != tc.wantReason:
				t.Errorf("reason %s, want %s (%s)", got.Reason, tc.wantReason, got.Message)
			case got != nil && !strings.Contains(got.Message, tc.wantNeeds):
				t.Errorf("message %q does not name %q", got.Message, tc.wantNeeds)
			}
		})
	}
}

// TestCheckCopySize: a copy built by templates is bounded.
func TestCheckCopySize(t *testing.T) {
	src := fieldsObj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: apps}}`)
	big := src.DeepCopy()
	big.Object["data"] = map[string]any{"x": strings.Repeat("a", MaxCopySize)}
	if ref := (Policy{}).CheckCopy(src, big, "east", true); ref == nil || ref.Reason != v1alpha1.ReasonCopyRefused {
		t.Errorf("a copy over MaxCopySize: %+v, want refused", ref)
	}
	if ref := (Policy{}).CheckCopy(src, src, "east", true); ref != nil {
		t.Errorf("a small copy: %s", ref.Message)
	}
}

// TestRuleAllowed: a rule whose kind grants power is inert without a SyncPolicy entry and
// names the entry; the registry's own kinds are never synced by rules; denyOverrides and
// denyRewrites make a cluster stricter.
func TestRuleAllowed(t *testing.T) {
	rule := func(group, kind string, m v1alpha1.Mutations) *v1alpha1.ResourceSyncRule {
		return &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK: v1alpha1.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Rules: []v1alpha1.SyncRule{{Mutations: m}}}}
	}
	crb := rule("rbac.authorization.k8s.io", "ClusterRoleBinding", v1alpha1.Mutations{})
	withOverride := rule("", "ConfigMap", v1alpha1.Mutations{Overrides: []v1alpha1.OverlayPatch{{Path: "data.x", Value: "y"}}})
	withRewrite := rule("", "ConfigMap", v1alpha1.Mutations{Namespace: &v1alpha1.NameMutations{AddSuffix: "-copy"}})
	clusters := rule(v1alpha1.GroupVersion.Group, "Cluster", v1alpha1.Mutations{})
	allowCRB := v1alpha1.SyncPolicySpec{Allow: []v1alpha1.PolicyAllow{{Kinds: []v1alpha1.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}}}}}
	strict := v1alpha1.SyncPolicySpec{DenyOverrides: true, DenyRewrites: true}
	// The seed's controller makes it on its own cluster; the built-in rule copies it here.
	seedCore := rule("", "Secret", v1alpha1.Mutations{})
	seedCore.Name, seedCore.Labels = "cluster-registry-core-resource-cluster-secrets-sink", map[string]string{v1alpha1.SeedCoreSyncLabel: "true"}
	for _, tc := range []struct {
		name       string
		rsr        *v1alpha1.ResourceSyncRule
		policy     []v1alpha1.SyncPolicySpec
		wantReason string
	}{
		{"ClusterRoleBinding, default", crb, nil, v1alpha1.ReasonNotAllowed},
		{"ClusterRoleBinding, allowed", crb, []v1alpha1.SyncPolicySpec{allowCRB}, ""},
		{"Clusters are the registry's", clusters, []v1alpha1.SyncPolicySpec{allowCRB}, v1alpha1.ReasonCopyRefused},
		{"overrides, default", withOverride, nil, ""},
		{"overrides, denied", withOverride, []v1alpha1.SyncPolicySpec{strict}, v1alpha1.ReasonNotAllowed},
		{"rewrites, denied", withRewrite, []v1alpha1.SyncPolicySpec{strict}, v1alpha1.ReasonNotAllowed},
		{"the built-in rule", CoreRule(), []v1alpha1.SyncPolicySpec{strict}, ""},
		{"the seed's membership rule for its reader Secrets", seedCore, nil, v1alpha1.ReasonCopyRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compiled, err := CompileRule(tc.rsr)
			if err != nil {
				t.Fatal(err)
			}
			got := NewPolicy(tc.policy, v1alpha1.DefaultNamespace, nil).RuleAllowed(tc.rsr, compiled)
			switch {
			case tc.wantReason == "" && got != nil:
				t.Errorf("refused: %s", got.Message)
			case tc.wantReason != "" && (got == nil || got.Reason != tc.wantReason):
				t.Errorf("RuleAllowed = %+v, want reason %s", got, tc.wantReason)
			}
			if got != nil && tc.wantReason == v1alpha1.ReasonNotAllowed && !strings.Contains(got.Message, "SyncPolicy") {
				t.Errorf("the message does not name the SyncPolicy it needs: %s", got.Message)
			}
		})
	}
}

// TestClusterFeaturesMaySync: rules may sync ClusterFeatures (the seed's users do), but
// never Clusters or SyncPolicies.
func TestClusterFeaturesMaySync(t *testing.T) {
	for kind, refused := range map[string]bool{"ClusterFeature": false, "Cluster": true, "SyncPolicy": true} {
		rsr := &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK: v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: kind}, Rules: []v1alpha1.SyncRule{{}}}}
		compiled, err := CompileRule(rsr)
		if err != nil {
			t.Fatal(err)
		}
		if got := (Policy{}).RuleAllowed(rsr, compiled) != nil; got != refused {
			t.Errorf("%s: refused = %v, want %v", kind, got, refused)
		}
	}
}
