package manifests_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

// tokenConfig returns a rest.Config authenticating as the ServiceAccount sa of the
// registry namespace with a token from the TokenRequest API, as peers and the
// controller get theirs. It waits until the aggregated ClusterRole role has rules
// (kube-controller-manager fills it).
func tokenConfig(t *testing.T, c client.Client, sa, aggregatedRole string) *rest.Config {
	t.Helper()
	return tokenConfigIn(t, c, v1alpha1.DefaultNamespace, sa, aggregatedRole)
}

// tokenConfigIn is tokenConfig for the ServiceAccount sa of namespace ns.
func tokenConfigIn(t *testing.T, c client.Client, ns, sa, aggregatedRole string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if aggregatedRole != "" {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var role rbacv1.ClusterRole
			if err := c.Get(ctx, client.ObjectKey{Name: aggregatedRole}, &role); err != nil {
				return false, err
			}
			return len(role.Rules) > 0, nil
		})
		if err != nil {
			t.Fatalf("ClusterRole %s was never aggregated (is kube-controller-manager running?): %v", aggregatedRole, err)
		}
	}
	admin := bed.Clusters[0]
	cs, err := admin.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return &rest.Config{
		Host:            admin.Host(),
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData()},
	}
}

type request struct {
	name string
	do   func(ctx context.Context, cs kubernetes.Interface, c client.Client) error
}

// outcomes runs each request and reports "allowed", "forbidden" or the unexpected error.
func outcomes(t *testing.T, cfg *rest.Config, reqs []request) map[string]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := v1alpha1.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reqs {
		err := r.do(context.Background(), cs, c)
		switch {
		case err == nil:
			got[r.name] = "allowed"
		case apierrors.IsForbidden(err):
			got[r.name] = "forbidden"
		default:
			got[r.name] = fmt.Sprintf("error: %v", err)
		}
	}
	return got
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"k": "v"}}
}

// TestReaderIdentityIsLeastPrivilege: with a real TokenRequest token of the reader
// ServiceAccount, peers can read the registry CRs, get namespaces and read Secrets in
// the registry namespace, and nothing else; they can write nothing. A ClusterRole a
// user adds with the reader-aggregated label extends what they can read.
func TestReaderIdentityIsLeastPrivilege(t *testing.T) {
	c := installed(t)
	ctx := context.Background()
	ns := v1alpha1.DefaultNamespace
	for _, s := range []*corev1.Secret{secret(ns, "reader-test"), secret("default", "reader-test"), secret("kube-system", "reader-test")} {
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The controller's bootstrap Role, as it keeps it with one peer issued a credential.
	issued := v1alpha1.IssuedReaderSecretName("reader-test-peer")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.BootstrapRoleName},
		Rules: members.BootstrapRules([]members.Reader{{ID: "reader-test-peer"}})}
	for _, o := range []client.Object{role, secret(ns, issued)} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The shared reader is the bootstrap credential.
	cfg := tokenConfig(t, c, v1alpha1.ReaderName, v1alpha1.ReaderAggregatedRoleName)
	// A per-peer reader, as the controller issues one for each peer: the reader.
	readers := v1alpha1.ReadersNamespace(ns)
	peerSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: v1alpha1.ReaderServiceAccountName("reader-test-peer")}}
	if err := c.Create(ctx, peerSA); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), peerSA) })
	peerCfg := tokenConfigIn(t, c, readers, peerSA.Name, v1alpha1.ReaderAggregatedRoleName)

	reqs := []request{
		{"list clusters", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.List(ctx, &v1alpha1.ClusterList{})
		}},
		{"list clusterfeatures", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.List(ctx, &v1alpha1.ClusterFeatureList{})
		}},
		{"list resourcesyncrules", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.List(ctx, &v1alpha1.ResourceSyncRuleList{})
		}},
		{"watch clusters", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			w, err := client.NewWithWatch(cfg, client.Options{Scheme: c.Scheme()})
			if err != nil {
				return err
			}
			wi, err := w.Watch(ctx, &v1alpha1.ClusterList{})
			if err == nil {
				wi.Stop()
			}
			return err
		}},
		{"get namespace kube-system", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			return err
		}},
		{"get secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).Get(ctx, "reader-test", metav1.GetOptions{})
			return err
		}},
		{"list secrets in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		// A credential issued to a peer: what the bootstrap credential reads, by name,
		// as the peer's connection caches it (a list and a watch selecting its name).
		{"get an issued credential", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).Get(ctx, issued, metav1.GetOptions{})
			return err
		}},
		{"list and watch an issued credential by name", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			byName := metav1.ListOptions{FieldSelector: "metadata.name=" + issued}
			if _, err := cs.CoreV1().Secrets(ns).List(ctx, byName); err != nil {
				return err
			}
			w, err := cs.CoreV1().Secrets(ns).Watch(ctx, byName)
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"get secret in default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets("default").Get(ctx, "reader-test", metav1.GetOptions{})
			return err
		}},
		{"get secret in kube-system", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets("kube-system").Get(ctx, "reader-test", metav1.GetOptions{})
			return err
		}},
		{"list secrets in all namespaces", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list namespaces", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list configmaps in default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create cluster", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: v1alpha1.ClusterSpec{ClusterID: "x"}})
		}},
		{"create resourcesyncrule", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.Create(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "intruder"},
				Spec: v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Rules: []v1alpha1.SyncRule{}}})
		}},
		{"create secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, secret(ns, "intruder"), metav1.CreateOptions{})
			return err
		}},
		{"update secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "reader-test", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.StringData = map[string]string{"k": "changed"}
			_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		}},
		{"delete secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			return cs.CoreV1().Secrets(ns).Delete(ctx, "reader-test", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"create namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
			return err
		}},
		{"create token for controller", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, v1alpha1.ControllerName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		// The key pair the credentials peers issue this cluster are sealed to.
		{"get the key secret", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(readers).Get(ctx, v1alpha1.ReaderKeySecretName, metav1.GetOptions{})
			return err
		}},
		{"list secrets in readers namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(readers).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	wantPeer := map[string]string{
		"get an issued credential":                    "allowed",
		"list and watch an issued credential by name": "allowed",
		"get the key secret":                          "forbidden",
		"list secrets in readers namespace":           "forbidden",
		"list clusters":                               "allowed",
		"list clusterfeatures":                        "allowed",
		"list resourcesyncrules":                      "allowed",
		"watch clusters":                              "allowed",
		"get namespace kube-system":                   "allowed",
		"get secret in registry namespace":            "allowed",
		"list secrets in registry namespace":          "allowed",
		"get secret in default":                       "forbidden",
		"get secret in kube-system":                   "forbidden",
		"list secrets in all namespaces":              "forbidden",
		"list namespaces":                             "forbidden",
		"list configmaps in default":                  "forbidden",
		"create cluster":                              "forbidden",
		"create resourcesyncrule":                     "forbidden",
		"create secret in registry namespace":         "forbidden",
		"update secret in registry namespace":         "forbidden",
		"delete secret in registry namespace":         "forbidden",
		"create namespace":                            "forbidden",
		"create token for controller":                 "forbidden",
	}
	// The bootstrap credential reads the Clusters, kube-system and the issued
	// credentials by name; nothing else.
	wantBootstrap := map[string]string{}
	for what := range wantPeer {
		wantBootstrap[what] = "forbidden"
	}
	for _, what := range []string{"list clusters", "watch clusters", "get namespace kube-system", "get an issued credential", "list and watch an issued credential by name"} {
		wantBootstrap[what] = "allowed"
	}
	if diff := cmp.Diff(wantBootstrap, outcomes(t, cfg, reqs)); diff != "" {
		t.Fatalf("shared reader (bootstrap credential) permissions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPeer, outcomes(t, peerCfg, reqs)); diff != "" {
		t.Fatalf("per-peer reader permissions (-want +got):\n%s", diff)
	}

	// The seed's "RBAC considerations": a ClusterRole with the reader-aggregated label
	// extends what peers may read on this cluster.
	extension := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "reader-test-configmaps", Labels: map[string]string{v1alpha1.ReaderAggregatedLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if err := c.Create(ctx, extension); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), extension) })
	listConfigMaps := []request{reqs[13]}
	if listConfigMaps[0].name != "list configmaps in default" {
		t.Fatal("request table changed: fix the index of 'list configmaps in default'")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return outcomes(t, peerCfg, listConfigMaps)["list configmaps in default"] == "allowed", nil
	})
	if err != nil {
		t.Fatalf("a ClusterRole labelled %s=true did not extend the per-peer reader: %v", v1alpha1.ReaderAggregatedLabel, err)
	}
	// ... not the bootstrap credential, and writing stays forbidden.
	if got := outcomes(t, cfg, listConfigMaps); got["list configmaps in default"] != "forbidden" {
		t.Errorf("after the extension, the bootstrap credential may list configmaps: %s", got["list configmaps in default"])
	}
	if got := outcomes(t, peerCfg, reqs[14:15]); got["create cluster"] != "forbidden" {
		t.Errorf("after the extension, create cluster: %s", got["create cluster"])
	}
}

// TestControllerIdentity: the controller may write the registry CRs and its
// namespace's Secrets, mint reader tokens and hold its Lease, but not write Secrets
// elsewhere.
func TestControllerIdentity(t *testing.T) {
	c := installed(t)
	ns := v1alpha1.DefaultNamespace
	// Its own rules are bound directly, not aggregated: nothing to wait for.
	cfg := tokenConfig(t, c, v1alpha1.ControllerName, "")
	// as runs do as the controller impersonating user in groups.
	as := func(user string, groups []string, do func(context.Context, kubernetes.Interface) error) func(context.Context, kubernetes.Interface, client.Client) error {
		return func(ctx context.Context, _ kubernetes.Interface, _ client.Client) error {
			imp := rest.CopyConfig(cfg)
			imp.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
			cs, err := kubernetes.NewForConfig(imp)
			if err != nil {
				return err
			}
			return do(ctx, cs)
		}
	}
	getNamespace := func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		return err
	}
	member := v1alpha1.MemberUser(ns, "east")
	memberGroups := []string{v1alpha1.MembersGroup}
	reqs := []request{
		// It writes as the members, and as nobody else: not as an administrator, not as a
		// ServiceAccount of another namespace, not in another group.
		{"impersonate a member", as(member, memberGroups, func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, secret(ns, "member-test"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})},
		{"impersonate system:masters", as(member, []string{"system:masters"}, getNamespace)},
		{"impersonate a user", as("admin", nil, getNamespace)},
		{"impersonate kube-system's default", as("system:serviceaccount:kube-system:default", nil, getNamespace)},
		{"create cluster", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "controller-test"}, Spec: v1alpha1.ClusterSpec{ClusterID: "controller-test"}}, client.DryRunAll)
		}},
		{"create secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, secret(ns, "controller-test"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"create secret in default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets("default").Create(ctx, secret("default", "controller-test"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"create reader token", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, v1alpha1.ReaderName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		{"create own token", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, v1alpha1.ControllerName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		{"get namespace kube-system", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			return err
		}},
		// The per-peer readers: created, given tokens and deleted in the readers namespace
		// only; the shared reader may be recreated (to revoke its tokens), no other
		// ServiceAccount of the registry namespace deleted.
		{"create peer reader and its token", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			readers := v1alpha1.ReadersNamespace(ns)
			sa, err := cs.CoreV1().ServiceAccounts(readers).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-test-"}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if _, err := cs.CoreV1().ServiceAccounts(readers).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); err != nil {
				return err
			}
			return cs.CoreV1().ServiceAccounts(readers).Delete(ctx, sa.Name, metav1.DeleteOptions{})
		}},
		{"delete shared reader", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			return cs.CoreV1().ServiceAccounts(ns).Delete(ctx, v1alpha1.ReaderName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"delete own serviceaccount", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			return cs.CoreV1().ServiceAccounts(ns).Delete(ctx, v1alpha1.ControllerName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"list nodes", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list leases in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"delete namespace default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			return cs.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		// What the authentication and authorization of /metrics needs.
		{"create tokenreview", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}}, metav1.CreateOptions{})
			return err
		}},
		{"create subjectaccessreview", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, metricsAccessReview("someone"), metav1.CreateOptions{})
			return err
		}},
		// Its key pair: the Secret of that name in the readers namespace, and no other.
		{"create and get the key secret", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			readers := v1alpha1.ReadersNamespace(ns)
			_, err := cs.CoreV1().Secrets(readers).Create(ctx, secret(readers, v1alpha1.ReaderKeySecretName), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return err
			}
			_, err = cs.CoreV1().Secrets(readers).Get(ctx, v1alpha1.ReaderKeySecretName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // allowed, and not made yet
			}
			return err
		}},
		// The bootstrap Role: it may grant the bootstrap credential the Secrets of its
		// namespace by name (no more than it holds itself), and no other Role.
		{"create and update the bootstrap role", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.BootstrapRoleName},
				Rules: members.BootstrapRules([]members.Reader{{ID: "controller-test"}})}
			dry := []string{metav1.DryRunAll}
			if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{DryRun: dry}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			existing, err := cs.RbacV1().Roles(ns).Get(ctx, v1alpha1.BootstrapRoleName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // allowed, and not made here
			}
			if err != nil {
				return err
			}
			existing.Rules = role.Rules
			_, err = cs.RbacV1().Roles(ns).Update(ctx, existing, metav1.UpdateOptions{DryRun: dry})
			return err
		}},
		{"create a role granting configmaps", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.BootstrapRoleName},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
			_, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"get another role", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.RbacV1().Roles(ns).Get(ctx, v1alpha1.ControllerName, metav1.GetOptions{})
			return err
		}},
		// The credentials issued in the clear to legacy peers live in the readers
		// namespace, where no peer reads: the controller gets, updates and deletes them.
		{"get another secret in readers namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(v1alpha1.ReadersNamespace(ns)).Get(ctx, "reader-test", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // allowed, and not made here
			}
			return err
		}},
		// The legacy peers' binding: its subjects are the controller's, and it may bind
		// that ClusterRole only.
		{"update the legacy reader binding", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, v1alpha1.LegacyReaderRoleName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			crb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: v1alpha1.ReadersNamespace(ns), Name: "cluster-registry-reader-test"}}
			_, err = cs.RbacV1().ClusterRoleBindings().Update(ctx, crb, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"update another clusterrolebinding", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, v1alpha1.ReaderName, metav1.GetOptions{})
			return err
		}},
		{"list secrets in readers namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(v1alpha1.ReadersNamespace(ns)).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	want := map[string]string{
		"impersonate a member":                    "allowed",
		"impersonate system:masters":              "forbidden",
		"impersonate a user":                      "forbidden",
		"impersonate kube-system's default":       "forbidden",
		"create and get the key secret":           "allowed",
		"create and update the bootstrap role":    "allowed",
		"create a role granting configmaps":       "forbidden",
		"get another role":                        "forbidden",
		"get another secret in readers namespace": "allowed",
		"update the legacy reader binding":        "allowed",
		"update another clusterrolebinding":       "forbidden",
		"list secrets in readers namespace":       "forbidden",
		"create cluster":                          "allowed",
		"create secret in registry namespace":     "allowed",
		"create secret in default":                "forbidden",
		"create reader token":                     "allowed",
		"create own token":                        "forbidden",
		"get namespace kube-system":               "allowed",
		"create peer reader and its token":        "allowed",
		"delete shared reader":                    "allowed",
		"delete own serviceaccount":               "forbidden",
		"list nodes":                              "allowed",
		"list leases in registry namespace":       "allowed",
		"delete namespace default":                "forbidden",
		"create tokenreview":                      "allowed",
		"create subjectaccessreview":              "allowed",
	}
	if diff := cmp.Diff(want, outcomes(t, cfg, reqs)); diff != "" {
		t.Fatalf("controller permissions (-want +got):\n%s", diff)
	}
}

// TestMembersGrant: the identity the controller writes a member's copies as may, by
// default, write the Secrets of the registry namespace (the seed's scenarios) and what a
// ClusterRole labelled controller-aggregated grants, and nothing else: not the registry's
// own CRs, not Secrets elsewhere, not the readers namespace.
func TestMembersGrant(t *testing.T) {
	c := installed(t)
	ns := v1alpha1.DefaultNamespace
	cfg := bed.Clusters[0].DirectConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: v1alpha1.MemberUser(ns, "east"), Groups: []string{v1alpha1.MembersGroup}}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	cm := func(namespace string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "member-test"}}
	}
	reqs := []request{
		{"create secret in registry namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets(ns).Create(ctx, secret(ns, "member-test"), dry)
			return err
		}},
		{"create secret in default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().Secrets("default").Create(ctx, secret("default", "member-test"), dry)
			return err
		}},
		{"create secret in readers namespace", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			readers := v1alpha1.ReadersNamespace(ns)
			_, err := cs.CoreV1().Secrets(readers).Create(ctx, secret(readers, "member-test"), dry)
			return err
		}},
		{"create cluster", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member-test"}, Spec: v1alpha1.ClusterSpec{ClusterID: "member-test"}}, client.DryRunAll)
		}},
		{"create resourcesyncrule", func(ctx context.Context, _ kubernetes.Interface, c client.Client) error {
			return c.Create(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "member-test"}}, client.DryRunAll)
		}},
		{"create configmap in default", func(ctx context.Context, cs kubernetes.Interface, _ client.Client) error {
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm("default"), dry)
			return err
		}},
	}
	want := map[string]string{
		"create secret in registry namespace": "allowed",
		"create secret in default":            "forbidden",
		"create secret in readers namespace":  "forbidden",
		"create cluster":                      "forbidden",
		"create resourcesyncrule":             "forbidden",
		"create configmap in default":         "forbidden",
	}
	if diff := cmp.Diff(want, outcomes(t, cfg, reqs)); diff != "" {
		t.Fatalf("a member's default grant (-want +got):\n%s", diff)
	}

	// A ClusterRole with the controller-aggregated label extends it, as it extends what
	// the controller reads.
	ctx := context.Background()
	extension := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "members-test-configmaps", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}},
	}
	if err := c.Create(ctx, extension); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), extension) })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return outcomes(t, cfg, reqs[5:6])["create configmap in default"] == "allowed", nil
	})
	if err != nil {
		t.Fatalf("a ClusterRole labelled %s=true did not extend the members' grant: %v", v1alpha1.ControllerAggregatedLabel, err)
	}
}

// metricsAccessReview asks whether user may get the non-resource URL /metrics.
func metricsAccessReview(user string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
}

// TestMetricsReaderRole: a ServiceAccount bound to cluster-registry-metrics-reader may get
// /metrics, which is what the controller's metrics server asks the API server
// (SubjectAccessReview), and nothing else; one without the binding may not.
func TestMetricsReaderRole(t *testing.T) {
	c := installed(t)
	ctx := t.Context()
	cs, err := bed.Clusters[0].Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := v1alpha1.DefaultNamespace
	for _, name := range []string{"scraper-bound", "scraper-unbound"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-bound"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: v1alpha1.MetricsReaderRoleName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper-bound"}},
	}
	if err := c.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	review := func(user string, attrs authorizationv1.SubjectAccessReviewSpec) bool {
		t.Helper()
		attrs.User = user
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: attrs}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	metrics := func(verb string) authorizationv1.SubjectAccessReviewSpec {
		return authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: verb}}
	}
	tests := []struct {
		name string
		user string
		spec authorizationv1.SubjectAccessReviewSpec
		want bool
	}{
		{"bound: get /metrics", "scraper-bound", metrics("get"), true},
		{"bound: post /metrics", "scraper-bound", metrics("post"), false},
		{"bound: get /healthz", "scraper-bound", authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz/etcd", Verb: "get"}}, false},
		{"bound: list secrets", "scraper-bound", authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "secrets"}}, false},
		{"unbound: get /metrics", "scraper-unbound", metrics("get"), false},
	}
	got, want := map[string]bool{}, map[string]bool{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		for _, tt := range tests {
			got[tt.name] = review("system:serviceaccount:"+ns+":"+tt.user, tt.spec)
			want[tt.name] = tt.want
		}
		return cmp.Equal(want, got), nil
	})
	if diff := cmp.Diff(want, got); err != nil && diff != "" {
		t.Fatalf("SubjectAccessReviews (-want +got):\n%s", diff)
	}
}
