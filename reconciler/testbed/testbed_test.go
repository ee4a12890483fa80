package testbed_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	registryv1alpha1 "github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Clusters: 2}, &bed))
}

// needBed skips without the binaries and returns the shared bed.
func needBed(t *testing.T) *testbed.Bed {
	t.Helper()
	testbed.SkipIfNoAssets(t)
	if bed == nil {
		t.Fatal("binaries present but no bed: TestMain did not start it")
	}
	return bed
}

// eventually polls cond every 100ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last error
	for {
		if last = cond(ctx); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace for the test and deletes it afterwards.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "testbed-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func TestAssets(t *testing.T) {
	all := []string{"kube-apiserver", "etcd", "kubectl", "kube-controller-manager"}
	tests := []struct {
		name   string
		set    bool
		files  []string
		wantOK bool
	}{
		{name: "unset"},
		{name: "empty dir", set: true},
		{name: "controller manager missing", set: true, files: all[:3]},
		{name: "all present", set: true, files: all, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			want := dir
			if tt.set {
				t.Setenv(testbed.EnvAssets, dir)
			} else {
				t.Setenv(testbed.EnvAssets, "")
				want = ""
			}
			gotDir, gotOK := testbed.Assets()
			if gotDir != want || gotOK != tt.wantOK {
				t.Errorf("Assets() = %q, %v; want %q, %v", gotDir, gotOK, want, tt.wantOK)
			}
			if !tt.wantOK {
				_, err := testbed.Start(t.Context(), testbed.Options{})
				if !errors.Is(err, testbed.ErrNoAssets) || !strings.Contains(err.Error(), "make testbin") {
					t.Errorf("Start without binaries: got %v, want ErrNoAssets mentioning make testbin", err)
				}
			}
		})
	}
}

func TestStartRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts testbed.Options
	}{
		{name: "negative count", opts: testbed.Options{Clusters: -1}},
		{name: "names and count disagree", opts: testbed.Options{Clusters: 3, Names: []string{"a", "b"}}},
		{name: "duplicate names", opts: testbed.Options{Names: []string{"a", "a"}}},
		{name: "name not a DNS label", opts: testbed.Options{Names: []string{"Cluster_A"}}},
		{name: "empty name", opts: testbed.Options{Names: []string{""}}},
		{name: "realistic without controller manager", opts: testbed.Options{Realistic: true, NoControllerManager: true}},
		{name: "realistic with too many clusters", opts: testbed.Options{Realistic: true, Clusters: testbed.MaxRealisticClusters + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := testbed.Start(t.Context(), tt.opts); !errors.Is(err, testbed.ErrInvalidOptions) {
				t.Errorf("Start(%+v) = %v, want ErrInvalidOptions", tt.opts, err)
			}
		})
	}
}

func TestKubeconfig(t *testing.T) {
	b := needBed(t)
	if diff := cmp.Diff([]string{"cluster-a", "cluster-b"}, b.Contexts()); diff != "" {
		t.Errorf("Contexts() (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(b.KubeconfigPath, b.Dir) {
		t.Errorf("kubeconfig %s is not under Dir %s", b.KubeconfigPath, b.Dir)
	}
	kc, err := clientcmd.LoadFromFile(b.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != "cluster-a" {
		t.Errorf("current-context = %q, want cluster-a", kc.CurrentContext)
	}
	var contexts []string
	for name := range kc.Contexts {
		contexts = append(contexts, name)
	}
	slices.Sort(contexts)
	if diff := cmp.Diff(b.Contexts(), contexts); diff != "" {
		t.Errorf("kubeconfig contexts (-want +got):\n%s", diff)
	}

	kubectl := filepath.Join(os.Getenv(testbed.EnvAssets), "kubectl")
	for _, c := range b.Clusters {
		t.Run(c.Name, func(t *testing.T) {
			if got := b.Cluster(c.Name); got != c {
				t.Errorf("Cluster(%q) = %v, want %v", c.Name, got, c)
			}
			cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, c.Name, nil, nil).ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != c.Host() || c.Config.Host != c.Host() {
				t.Errorf("context server %q, Config.Host %q, want the proxy %q", cfg.Host, c.Config.Host, c.Host())
			}
			if c.Host() == c.APIServerURL() {
				t.Errorf("Host() %q is the API server itself, want the proxy", c.Host())
			}
			if !strings.HasPrefix(c.Host(), "https://127.0.0.1:") || !strings.HasPrefix(c.APIServerURL(), "https://127.0.0.1:") {
				t.Errorf("Host() %q / APIServerURL() %q not on loopback", c.Host(), c.APIServerURL())
			}
			if diff := cmp.Diff(c.CAData(), cfg.CAData); diff != "" {
				t.Errorf("CA (-CAData +kubeconfig):\n%s", diff)
			}
			want, err := c.KubeSystemUID(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ns, err := clientset(t, cfg).CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ns.UID != want {
				t.Errorf("kube-system UID through the kubeconfig = %s, want %s", ns.UID, want)
			}
			// The real kubectl reads the file too.
			out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", b.KubeconfigPath, "--context", c.Name,
				"get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}").CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl: %v: %s", err, out)
			}
			if got := types.UID(out); got != want {
				t.Errorf("kubectl kube-system UID = %s, want %s", got, want)
			}
			// The one-cluster kubeconfig points at the same place.
			single, err := c.Kubeconfig()
			if err != nil {
				t.Fatal(err)
			}
			scfg, err := clientcmd.RESTConfigFromKubeConfig(single)
			if err != nil {
				t.Fatal(err)
			}
			if scfg.Host != c.Host() {
				t.Errorf("Kubeconfig() server = %q, want %q", scfg.Host, c.Host())
			}
		})
	}
}

func TestKubeSystemUIDsDiffer(t *testing.T) {
	b := needBed(t)
	seen := map[types.UID]string{}
	for _, c := range b.Clusters {
		uid, err := c.KubeSystemUID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if uid == "" {
			t.Errorf("%s: empty kube-system UID", c.Name)
		}
		if other, dup := seen[uid]; dup {
			t.Errorf("%s and %s share kube-system UID %s", other, c.Name, uid)
		}
		seen[uid] = c.Name
	}
}

func TestClient(t *testing.T) {
	b := needBed(t)
	c := b.Clusters[0]
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	// The scheme knows our kinds, so other packages can use one client for everything.
	gvks, _, err := cl.Scheme().ObjectKinds(&registryv1alpha1.Cluster{})
	if err != nil || len(gvks) == 0 || gvks[0].GroupVersion() != registryv1alpha1.GroupVersion {
		t.Errorf("client scheme does not know v1alpha1.Cluster: %v %v", gvks, err)
	}
	var ns corev1.Namespace
	if err := cl.Get(t.Context(), types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		t.Fatal(err)
	}
	want, err := c.KubeSystemUID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ns.UID != want {
		t.Errorf("kube-system UID via Client() = %s, want %s", ns.UID, want)
	}
}

// TestRBACDeniesServiceAccountToken proves the API server authenticates TokenRequest
// tokens and authorizes them with RBAC: denied without a grant, allowed with one.
func TestRBACDeniesServiceAccountToken(t *testing.T) {
	b := needBed(t)
	c := b.Clusters[0]
	admin := clientset(t, c.Config)
	ns := namespace(t, admin)
	ctx := t.Context()

	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	if tr.Status.Token == "" {
		t.Fatal("TokenRequest returned an empty token")
	}
	sa := clientset(t, &rest.Config{
		Host:            c.Host(),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()},
		BearerToken:     tr.Status.Token,
	})

	// Authenticated as the ServiceAccount (not anonymous, not rejected).
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the token: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":reader"; got != want {
		t.Errorf("token authenticates as %q, want %q", got, want)
	}

	listSecrets := func(namespace string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := sa.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
			return err
		}
	}
	checks := []struct {
		name string
		do   func(context.Context) error
	}{
		{"list secrets in its namespace", listSecrets(ns)},
		{"list secrets in kube-system", listSecrets(metav1.NamespaceSystem)},
		{"list namespaces", func(ctx context.Context) error {
			_, err := sa.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			return err
		}},
		{"create a configmap", func(ctx context.Context) error {
			_, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, check := range checks {
		if err := check.do(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("%s without RBAC: got %v, want Forbidden", check.name, err)
		}
	}

	// A Role grant makes exactly that allowed.
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "granted list secrets", listSecrets(ns))
	if err := listSecrets(metav1.NamespaceSystem)(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets in kube-system after a namespaced grant: got %v, want Forbidden", err)
	}
}

func TestConfigFor(t *testing.T) {
	b := needBed(t)
	c := b.Clusters[1]
	tests := []struct {
		name          string
		groups        []string
		wantForbidden bool
	}{
		{name: "alice", wantForbidden: true},
		{name: "root", groups: []string{"system:masters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := c.ConfigFor(tt.name, tt.groups)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != c.Host() {
				t.Errorf("Host = %q, want the proxy %q", cfg.Host, c.Host())
			}
			cs := clientset(t, cfg)
			review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if review.Status.UserInfo.Username != tt.name {
				t.Errorf("authenticated as %q, want %q", review.Status.UserInfo.Username, tt.name)
			}
			_, err = cs.CoreV1().Secrets(metav1.NamespaceSystem).List(t.Context(), metav1.ListOptions{})
			if got := apierrors.IsForbidden(err); got != tt.wantForbidden || (err != nil && !got) {
				t.Errorf("list kube-system secrets: err %v, want forbidden %v", err, tt.wantForbidden)
			}
		})
	}
}

// TestControllerManager checks, on every cluster, the controllers envtest lacks.
func TestControllerManager(t *testing.T) {
	b := needBed(t)
	tests := []struct {
		name  string
		check func(t *testing.T, c *testbed.Cluster, cs kubernetes.Interface)
	}{
		{"clusterrole aggregation", checkAggregation},
		{"namespace deletion finishes", checkNamespaceDeletion},
		{"service account token secret filled", checkTokenSecret},
	}
	for _, c := range b.Clusters {
		cs := clientset(t, c.Config)
		for _, tt := range tests {
			t.Run(c.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel() // namespace deletion alone takes 5s (the namespace controller's grace period)
				tt.check(t, c, cs)
			})
		}
	}
}

func checkAggregation(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface) {
	ctx := t.Context()
	label := "testbed.kubectl-registry.io/aggregate-to-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	aggregate, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{GenerateName: "testbed-aggregate-"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}
	part, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "testbed-part-", Labels: map[string]string{label: "true"}},
		Rules:      rules,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{aggregate.Name, part.Name} {
			_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	eventually(t, 20*time.Second, "aggregated rules", func(ctx context.Context) error {
		got, err := cs.RbacV1().ClusterRoles().Get(ctx, aggregate.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if diff := cmp.Diff(rules, got.Rules); diff != "" {
			return errors.New("rules (-want +got):\n" + diff)
		}
		return nil
	})
}

func checkNamespaceDeletion(t *testing.T, _ *testbed.Cluster, cs kubernetes.Interface) {
	ctx := t.Context()
	ns := namespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "namespace "+ns+" gone", func(ctx context.Context) error {
		got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there, phase " + string(got.Status.Phase))
	})
}

func checkTokenSecret(t *testing.T, c *testbed.Cluster, cs kubernetes.Interface) {
	ctx := t.Context()
	ns := namespace(t, cs)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "legacy"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var secret *corev1.Secret
	eventually(t, 20*time.Second, "token secret filled", func(ctx context.Context) error {
		var err error
		if secret, err = cs.CoreV1().Secrets(ns).Get(ctx, "legacy-token", metav1.GetOptions{}); err != nil {
			return err
		}
		if len(secret.Data[corev1.ServiceAccountTokenKey]) == 0 {
			return errors.New("no token yet")
		}
		return nil
	})
	if diff := cmp.Diff(string(c.CAData()), string(secret.Data[corev1.ServiceAccountRootCAKey])); diff != "" {
		t.Errorf("ca.crt is not the API server CA (-want +got):\n%s", diff)
	}
	if got := string(secret.Data[corev1.ServiceAccountNamespaceKey]); got != ns {
		t.Errorf("namespace key = %q, want %q", got, ns)
	}
	// The token is signed with the API server's key: it authenticates.
	sa := clientset(t, &rest.Config{
		Host:            c.Host(),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()},
		BearerToken:     string(secret.Data[corev1.ServiceAccountTokenKey]),
	})
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("authenticating with the legacy token: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":legacy"; got != want {
		t.Errorf("legacy token authenticates as %q, want %q", got, want)
	}
}

// TestCutAndHeal partitions the last cluster and heals it.
func TestCutAndHeal(t *testing.T) {
	b := needBed(t)
	c := b.Clusters[len(b.Clusters)-1]
	other := b.Clusters[0]
	t.Cleanup(func() {
		if err := c.Heal(); err != nil {
			t.Errorf("heal in cleanup: %v", err)
		}
	})
	cs := clientset(t, c.Config) // one config and client, used across the cut
	get := func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		return err
	}
	if err := get(t.Context()); err != nil {
		t.Fatalf("before cut: %v", err)
	}
	w, err := cs.CoreV1().Namespaces().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	if err := c.Cut(); err != nil {
		t.Fatal(err)
	}
	if !c.IsCut() {
		t.Error("IsCut() = false after Cut")
	}

	// An open watch ends.
	timeout := time.After(5 * time.Second)
drain:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				break drain
			}
			if ev.Type == watch.Error {
				break drain
			}
		case <-timeout:
			t.Fatal("watch through the proxy still open 5s after Cut")
		}
	}

	// New requests fail fast with connection refused.
	start := time.Now()
	err = get(t.Context())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("request after Cut: got %v, want connection refused", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("request after Cut took %s, want it to fail fast", d)
	}
	if err := c.Healthy(t.Context()); err == nil {
		t.Error("Healthy() = nil while cut")
	}

	// The partition is only the proxy: the cluster and the other cluster keep working.
	if _, err := clientset(t, c.DirectConfig()).CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{}); err != nil {
		t.Errorf("direct access while cut: %v", err)
	}
	if _, err := other.KubeSystemUID(t.Context()); err != nil {
		t.Errorf("%s while %s is cut: %v", other.Name, c.Name, err)
	}
	// The controller manager talks to the API server directly, so it keeps working.
	t.Run("controller manager while cut", func(t *testing.T) {
		checkAggregation(t, c, clientset(t, c.DirectConfig()))
	})
	if err := c.Cut(); err != nil {
		t.Errorf("second Cut: %v", err)
	}

	host := c.Host()
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c.Heal(); err != nil {
		t.Errorf("second Heal: %v", err)
	}
	if c.Host() != host || c.Config.Host != host {
		t.Errorf("host changed across Cut/Heal: %s -> %s (Config %s)", host, c.Host(), c.Config.Host)
	}
	if c.IsCut() {
		t.Error("IsCut() = true after Heal")
	}
	// The very same client works again.
	if err := get(t.Context()); err != nil {
		t.Errorf("same client after Heal: %v", err)
	}
	if err := c.Healthy(t.Context()); err != nil {
		t.Errorf("Healthy() after Heal: %v", err)
	}
}

// children returns the command names of this process's child processes.
func children(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var names []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) > 1 && fields[1] == self && fields[0] != "Z" {
			names = append(names, s[open+1:end])
		}
	}
	slices.Sort(names)
	return names
}

// TestStartStopCleansUp starts a bed of its own, stops it twice and checks that no
// process or file is left; then a start that fails halfway leaves nothing either.
func TestStartStopCleansUp(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	if testing.Short() {
		t.Skip("starts extra API servers")
	}
	before := children(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	t.Run("start and stop twice", func(t *testing.T) {
		b, err := testbed.Start(t.Context(), testbed.Options{Names: []string{"solo"}, NoControllerManager: true})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"solo"}, b.Contexts()); diff != "" {
			t.Errorf("Contexts() (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(b.Dir, tmp) {
			t.Errorf("Dir %s not under TMPDIR %s", b.Dir, tmp)
		}
		if _, err := b.Cluster("solo").KubeSystemUID(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(children(t)) <= len(before) {
			t.Errorf("no new child processes while the bed runs: %v", children(t))
		}
		if err := b.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := b.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if _, err := os.Stat(b.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Dir %s still there after Stop: %v", b.Dir, err)
		}
	})

	t.Run("failed start", func(t *testing.T) {
		_, err := testbed.Start(t.Context(), testbed.Options{
			Clusters:          1,
			CRDDirectoryPaths: []string{"/nonexistent/crds"},
		})
		if err == nil {
			t.Fatal("Start with a missing CRD directory succeeded")
		}
		t.Logf("expected error: %v", err)
	})

	if diff := cmp.Diff(before, children(t)); diff != "" {
		t.Errorf("child processes left behind (-before +after):\n%s", diff)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

// TestRestartAPIServer stops the first cluster's API server and starts it again: same
// address, certificates and data, so clients, users and tokens from before keep working,
// and kube-controller-manager carries on.
func TestRestartAPIServer(t *testing.T) {
	b := needBed(t)
	c := b.Clusters[0]
	t.Cleanup(func() {
		if err := c.StartAPIServer(context.Background()); err != nil {
			t.Errorf("start in cleanup: %v", err)
		}
	})
	ctx := t.Context()
	cs := clientset(t, c.Config) // made before the stop, used after it
	uid, err := c.KubeSystemUID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, cs)
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userCfg, err := c.ConfigFor("restart-user", []string{"restart-group"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokenCfg := &rest.Config{Host: c.Host(), TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()}, BearerToken: tr.Status.Token}
	host, direct := c.Host(), c.APIServerURL()
	// Process names are cut at 15 characters (kube-controller-manager is kube-controller).
	count := func(name string) int {
		n := 0
		for _, child := range children(t) {
			if child == name[:min(len(name), 15)] {
				n++
			}
		}
		return n
	}
	apiServers := count("kube-apiserver")

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if c.APIServerRunning() {
		t.Error("APIServerRunning() = true after StopAPIServer")
	}
	if err := c.StopAPIServer(); err != nil {
		t.Errorf("second StopAPIServer: %v", err)
	}
	if got := count("kube-apiserver"); got != apiServers-1 {
		t.Errorf("%d kube-apiserver processes after StopAPIServer, want %d", got, apiServers-1)
	}
	for _, name := range []string{"etcd", "kube-controller-manager"} {
		if count(name) != len(b.Clusters) {
			t.Errorf("%s stopped with the API server: children %v", name, children(t))
		}
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(short, metav1.NamespaceSystem, metav1.GetOptions{}); err == nil {
		t.Error("a request through the proxy succeeded while the API server is stopped")
	}
	if err := c.Healthy(short); err == nil {
		t.Error("Healthy() = nil while the API server is stopped")
	}
	if _, err := clientset(t, c.DirectConfig()).CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("direct request while stopped: got %v, want connection refused", err)
	}

	began := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver started again in %s", time.Since(began).Round(time.Millisecond))
	if !c.APIServerRunning() {
		t.Error("APIServerRunning() = false after StartAPIServer")
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Errorf("second StartAPIServer: %v", err)
	}
	if c.Host() != host || c.APIServerURL() != direct {
		t.Errorf("addresses changed: proxy %s -> %s, API server %s -> %s", host, c.Host(), direct, c.APIServerURL())
	}
	if got := count("kube-apiserver"); got != apiServers {
		t.Errorf("%d kube-apiserver processes after StartAPIServer, want %d", got, apiServers)
	}

	// The very same client, the same data.
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the same client after the restart: %v", err)
	}
	if got.UID != cm.UID || got.Data["k"] != "v" {
		t.Errorf("ConfigMap after the restart: uid %s data %v, want uid %s data map[k:v]", got.UID, got.Data, cm.UID)
	}
	if again, err := c.KubeSystemUID(ctx); err != nil || again != uid {
		t.Errorf("kube-system UID after the restart: %s, %v; want %s", again, err, uid)
	}
	// The bed's kubeconfig, a certificate user and a token issued before the stop.
	kc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: b.KubeconfigPath},
		&clientcmd.ConfigOverrides{CurrentContext: c.Name}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, user string
		cfg        *rest.Config
	}{
		{"kubeconfig", "", kc},
		{"certificate user", "restart-user", userCfg},
		{"service account token", "system:serviceaccount:" + ns + ":reader", tokenCfg},
	} {
		review, err := clientset(t, tt.cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s after the restart: %v", tt.name, err)
			continue
		}
		if tt.user != "" && review.Status.UserInfo.Username != tt.user {
			t.Errorf("%s authenticates as %q, want %q", tt.name, review.Status.UserInfo.Username, tt.user)
		}
	}
	t.Run("controller manager after the restart", func(t *testing.T) {
		checkNamespaceDeletion(t, c, cs)
	})

	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(ctx); err != nil {
		t.Errorf("Healthy() after RestartAPIServer: %v", err)
	}
}
