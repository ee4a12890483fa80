package join

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

var readersNS = v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace)

// credentialName is the Secret of a's readers namespace holding the credential a issues
// the legacy peer b.
var credentialName = v1alpha1.LegacyReaderSecretName("id-b")

// legacyCredential is the credential in the clear that cluster issuer's controller
// issues the legacy peer peer, its token expiring at exp; sub tells tokens apart.
func legacyCredential(t *testing.T, issuer, peer, sub string, exp time.Time) *corev1.Secret {
	t.Helper()
	id := types.UID("id-" + peer)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: readersNS, Name: v1alpha1.LegacyReaderSecretName(id),
			Labels: map[string]string{v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(id)},
			Annotations: map[string]string{
				v1alpha1.PeerClusterIDAnnotation:  string(id),
				v1alpha1.TokenExpiresAtAnnotation: exp.UTC().Format(time.RFC3339),
				v1alpha1.TokenIssuedAtAnnotation:  "2026-01-01T00:00:00.000000000Z",
			},
		},
		Type: v1alpha1.SecretTypeClusterRegistry,
		Data: map[string][]byte{v1alpha1.KubeconfigKey: kubeconfigWithToken(t, issuer, kubefake.Host(issuer),
			jwt(issuer, map[string]any{"sub": sub, "exp": exp.Unix()}))},
	}
}

// issuer is a controller of a: once a names b a legacy peer, the first read of the
// credential finds cred.
func issuer(cred *corev1.Secret) interceptor.Funcs {
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		err := c.Get(ctx, key, obj, opts...)
		if !apierrors.IsNotFound(err) || key != client.ObjectKeyFromObject(cred) {
			return err
		}
		var peer v1alpha1.Cluster
		if c.Get(ctx, client.ObjectKey{Name: "b"}, &peer) != nil || !v1alpha1.IsLegacyPeer(&peer) {
			return err
		}
		if err := c.Create(ctx, cred.DeepCopy()); err != nil {
			return err
		}
		return c.Get(ctx, key, obj, opts...)
	}}
}

// mixedGroup returns a Factory of a (kubectl-registry, with its readers namespace and
// funcs on its client) and b (the seed's controller), a current.
func mixedGroup(t *testing.T, funcs interceptor.Funcs, objsA ...client.Object) *kubefake.Factory {
	t.Helper()
	f := kubefake.New(nil)
	objsA = append(objsA, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readersNS}})
	addFakeCluster(t, f, "a", readerToken("a"), funcs, objsA...)
	addFakeCluster(t, f, "b", seedToken("b"), interceptor.Funcs{})
	f.Current, f.Explicit = "a", fakeKubeconfig
	return f
}

// consentedCopy is a's Cluster of b as join --legacy writes it, with a status.
func consentedCopy(t *testing.T, consent bool, status v1alpha1.ClusterStatus) *v1alpha1.Cluster {
	t.Helper()
	c, err := buildCopies(localCluster("b", "id-b", kubefake.Host("b")), readerSecret(t, "b", kubefake.Host("b")), v1alpha1.DefaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	if consent {
		c.Cluster.Annotations[v1alpha1.LegacyPeerAnnotation] = "true"
	}
	c.Cluster.Status = status
	return c.Cluster
}

func TestRunsSeed(t *testing.T) {
	secret := func(data []byte) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{v1alpha1.KubeconfigKey: data}}
	}
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   bool
	}{
		{name: "not read", secret: nil, want: false},
		{name: "a token that expires (kubectl-registry)", secret: secret(readerKubeconfig(t, "a", "https://a.example")), want: false},
		{name: "a token that states no expiry (the seed)", secret: secret(kubeconfigWithToken(t, "a", "https://a.example", seedToken("a"))), want: true},
		{name: "a token that is no JWT", secret: secret(kubeconfigWithToken(t, "a", "https://a.example", "static")), want: true},
		{name: "no kubeconfig", secret: secret([]byte("not: [a kubeconfig")), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&side{secret: tt.secret}).runsSeed(); got != tt.want {
				t.Errorf("runsSeed() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestControllerChecks checks that join tells which controller each side runs before it
// writes anything, and refuses what the mode of join cannot do.
func TestControllerChecks(t *testing.T) {
	const (
		seedB = `the reader Secret cluster-registry/b of its Cluster b holds a token that states no expiry, as the seed's controller writes (kubectl-registry's expire)`
		oursB = `the reader Secret cluster-registry/b of its Cluster b holds a token that expires (at 2030-01-02T03:04:05Z), as kubectl-registry's controller writes`
	)
	tests := []struct {
		name   string
		tokenA string
		tokenB string
		// noReaders drops a's readers namespace; consent puts a's Cluster of b, consented.
		noReaders, consent bool
		args               []string
		want               string
	}{
		{name: "the peer runs the seed's", tokenA: readerToken("a"), tokenB: seedToken("b"),
			want: "context b runs the seed's cluster-registry-controller: " + seedB + ". It cannot use the shared reader Secret of context a that this join would copy to it (a bootstrap credential, refused listing namespaces): pass --legacy to name it a legacy peer on a and copy it the credential a issues it in the clear (docs/migrate.md, step 5)"},
		{name: "the peer runs the seed's, one way", tokenA: readerToken("a"), tokenB: seedToken("b"), args: []string{"--one-way"},
			want: "context b runs the seed's cluster-registry-controller: " + seedB + ". It cannot use the shared reader Secret of context a that this join would copy to it (a bootstrap credential, refused listing namespaces): pass --legacy to name it a legacy peer on a and copy it the credential a issues it in the clear (docs/migrate.md, step 5)"},
		{name: "side A runs the seed's", tokenA: seedToken("a"), tokenB: readerToken("b"), args: []string{"--legacy"},
			want: "context a runs the seed's cluster-registry-controller: the reader Secret cluster-registry/a of its Cluster a holds a token that states no expiry, as the seed's controller writes (kubectl-registry's expire). Side A (--context) must run kubectl-registry's, which issues side B the credential: swap --context and --peer-context and pass --legacy (docs/migrate.md, step 5)"},
		{name: "both run the seed's", tokenA: seedToken("a"), tokenB: seedToken("b"), args: []string{"--legacy"},
			want: "context a and context b both run the seed's cluster-registry-controller (the reader Secret cluster-registry/a of its Cluster a holds a token that states no expiry, as the seed's controller writes (kubectl-registry's expire); " + seedB + "): join needs kubectl-registry's controller on side A (--context), and on side B unless --legacy. Between two members running the seed's, copy the Clusters and reader Secrets as the seed's README does (docs/migrate.md, Going back, step 3)"},
		{name: "legacy, but the peer runs kubectl-registry", tokenA: readerToken("a"), tokenB: readerToken("b"), args: []string{"--legacy"},
			want: "context b runs kubectl-registry's controller, not the seed's: " + oursB + ". It opens the sealed credential a issues it and needs no legacy consent: run join without --legacy (if a names it a legacy peer, remove that first: kubectl annotate cluster b cluster-registry.k8s.cisco.com/legacy-peer- --context a --kubeconfig /fake/kubeconfig)"},
		{name: "legacy, no readers namespace", tokenA: readerToken("a"), tokenB: seedToken("b"), noReaders: true, args: []string{"--legacy"},
			want: "the readers namespace cluster-registry-readers is missing on context a: kubectl-registry's controller keeps there the credentials it issues; run: kubectl registry install --context a --kubeconfig /fake/kubeconfig"},
		{name: "a consent left for a peer that runs kubectl-registry", tokenA: readerToken("a"), tokenB: readerToken("b"), consent: true,
			want: "context a names context b a legacy peer (annotation cluster-registry.k8s.cisco.com/legacy-peer=true on its Cluster b), but b runs kubectl-registry's controller: remove that consent first, which revokes the credential issued in the clear: kubectl annotate cluster b cluster-registry.k8s.cisco.com/legacy-peer- --context a --kubeconfig /fake/kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := kubefake.New(nil)
			var objsA []client.Object
			if !tt.noReaders {
				objsA = append(objsA, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readersNS}})
			}
			if tt.consent {
				objsA = append(objsA, consentedCopy(t, true, v1alpha1.ClusterStatus{}))
			}
			addFakeCluster(t, f, "a", tt.tokenA, interceptor.Funcs{}, objsA...)
			addFakeCluster(t, f, "b", tt.tokenB, interceptor.Funcs{})
			f.Current, f.Explicit = "a", fakeKubeconfig
			before := map[string]map[string]string{"a": fakeSnapshot(t, f.Cluster("a").Client), "b": fakeSnapshot(t, f.Cluster("b").Client)}
			_, stdout, _, err := runFake(t, f, nil, append([]string{"--peer-context", "b"}, tt.args...)...)
			if diff := cmp.Diff(plugintest.Exit{Code: 2, Msg: tt.want}, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			after := map[string]map[string]string{"a": fakeSnapshot(t, f.Cluster("a").Client), "b": fakeSnapshot(t, f.Cluster("b").Client)}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("objects changed (-before +after):\n%s", diff)
			}
		})
	}
}

// fakeSnapshot is what join may write on a fake cluster: its Clusters and the Secrets of
// the registry namespace, by resourceVersion.
func fakeSnapshot(t *testing.T, cl client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	var clusters v1alpha1.ClusterList
	if err := cl.List(context.Background(), &clusters); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		out["cluster/"+c.Name] = c.ResourceVersion
	}
	var secrets corev1.SecretList
	if err := cl.List(context.Background(), &secrets, client.InNamespace(v1alpha1.DefaultNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out["secret/"+s.Name] = s.ResourceVersion
	}
	return out
}

// legacyLines is what join --legacy reports without -o, outcome per object in order.
func legacyLines(outcomes ...string) string {
	objs := []string{"secret/b", clusterResource + "/b", "secret/a", clusterResource + "/a"}
	ons := []string{"a", "a", "b", "b"}
	var b strings.Builder
	for i, o := range outcomes {
		b.WriteString(objs[i] + " " + o + " on " + ons[i] + "\n")
	}
	return b.String()
}

// TestRunLegacy runs join --legacy on fake clusters whose side A's controller issues the
// credential once the consent is written.
func TestRunLegacy(t *testing.T) {
	ctx := context.Background()
	cred := legacyCredential(t, "a", "b", "first", tokenExpires)

	t.Run("consent, credential, copies", func(t *testing.T) {
		f := mixedGroup(t, issuer(cred))
		_, stdout, stderr, err := runFake(t, f, nil, "--peer-context", "b", "--legacy")
		if err != nil {
			t.Fatalf("join: %v\nstderr: %s", err, stderr)
		}
		if diff := cmp.Diff(legacyLines("created", "created", "created", "created"), stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		var peer v1alpha1.Cluster
		if err := f.Cluster("a").Client.Get(ctx, client.ObjectKey{Name: "b"}, &peer); err != nil || !v1alpha1.IsLegacyPeer(&peer) {
			t.Errorf("a's Cluster of b: consent %v (%v), want it", peer.Annotations, err)
		}
		var held corev1.Secret
		if err := f.Cluster("b").Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "a"}, &held); err != nil {
			t.Fatal(err)
		}
		want := map[string][]byte{v1alpha1.KubeconfigKey: cred.Data[v1alpha1.KubeconfigKey]}
		if diff := cmp.Diff(want, held.Data); diff != "" {
			t.Errorf("b's Secret a (-want +got):\n%s", diff)
		}
		if held.Type != v1alpha1.SecretTypeClusterRegistry || held.Annotations[v1alpha1.TokenExpiresAtAnnotation] != "2030-01-02T03:04:05Z" {
			t.Errorf("b's Secret a: type %q, annotations %v", held.Type, held.Annotations)
		}
		if err := f.Cluster("b").Client.Get(ctx, client.ObjectKey{Name: "a"}, &v1alpha1.Cluster{}); err != nil {
			t.Errorf("b's Cluster a: %v", err)
		}

		// Again: nothing changes. Then a's controller renews the credential: the copy
		// on b is refreshed, and only it.
		_, stdout, _, err = runFake(t, f, nil, "--peer-context", "b", "--legacy")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(legacyLines("unchanged", "unchanged", "unchanged", "unchanged"), stdout); diff != "" {
			t.Errorf("again: stdout (-want +got):\n%s", diff)
		}
		renewed := legacyCredential(t, "a", "b", "renewed", tokenExpires.Add(time.Hour))
		current := &corev1.Secret{}
		if err := f.Cluster("a").Client.Get(ctx, client.ObjectKeyFromObject(cred), current); err != nil {
			t.Fatal(err)
		}
		current.Data, current.Annotations = renewed.Data, renewed.Annotations
		if err := f.Cluster("a").Client.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
		_, stdout, _, err = runFake(t, f, nil, "--peer-context", "b", "--legacy")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(legacyLines("unchanged", "unchanged", "configured", "unchanged"), stdout); diff != "" {
			t.Errorf("renewed: stdout (-want +got):\n%s", diff)
		}
	})

	t.Run("dry run before the consent", func(t *testing.T) {
		f := mixedGroup(t, issuer(cred))
		_, stdout, stderr, err := runFake(t, f, nil, "--peer-context", "b", "--legacy", "--dry-run=client")
		if err != nil {
			t.Fatal(err)
		}
		want := "secret/b created on a (dry run)\n" + clusterResource + "/b created on a (dry run)\n"
		if diff := cmp.Diff(want, stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		wantErr := "note: the credential context a issues context b in the clear (Secret cluster-registry-readers/" + credentialName + ") is missing: a's controller issues it once the consent is written. Then join writes it on b as the Secret cluster-registry/a, and the Cluster a; not shown in a dry run\n"
		if diff := cmp.Diff(wantErr, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
		if err := f.Cluster("a").Client.Get(ctx, client.ObjectKey{Name: "b"}, &v1alpha1.Cluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("a's Cluster of b: %v, want not found", err)
		}
	})

	t.Run("dry run after the consent masks the credential", func(t *testing.T) {
		f := mixedGroup(t, interceptor.Funcs{}, consentedCopy(t, true, v1alpha1.ClusterStatus{}), cred.DeepCopy())
		_, stdout, _, err := runFake(t, f, nil, "--peer-context", "b", "--legacy", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# on context a\napiVersion: v1\n", "---\n# on context b\napiVersion: v1\n", "kubeconfig: Kioq\n", "cluster-registry.k8s.cisco.com/legacy-peer: \"true\"\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if n := strings.Count(stdout, "---\n"); n != 3 {
			t.Errorf("stdout has %d separators, want 3 (four objects):\n%s", n, stdout)
		}
		if strings.Contains(stdout, "token-a") {
			t.Errorf("stdout shows the credential:\n%s", stdout)
		}
	})

	t.Run("no credential within the timeout", func(t *testing.T) {
		status := v1alpha1.ClusterStatus{Conditions: []v1alpha1.ClusterCondition{{
			Type: v1alpha1.ClusterConditionReaderKeyReady, Status: corev1.ConditionFalse,
			Reason: v1alpha1.ReasonNoReaderKey, Message: "the peer advertises no public key",
		}}}
		expired := legacyCredential(t, "a", "b", "old", time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		f := mixedGroup(t, interceptor.Funcs{}, consentedCopy(t, false, status), expired)
		_, _, stderr, err := runFake(t, f, nil, "--peer-context", "b", "--legacy", "--timeout", "200ms")
		want := "timed out after 200ms waiting for the controller of context a to issue context b a reader credential in the clear: " +
			"on a, the credential for b (Secret cluster-registry-readers/" + credentialName + ") holds a token that expired at 2025-01-01T00:00:00Z. " +
			"On a, the Cluster b says ReaderKeyReady False, reason NoReaderKey: the peer advertises no public key. Is \"kubectl registry serve\" running on a?\n" +
			"written: secret/b created on a, " + clusterResource + "/b configured on a\n" +
			"not written: secret/a on b, " + clusterResource + "/a on b\n" +
			"run the same join again to finish: it changes only what is missing"
		if diff := cmp.Diff(plugintest.Exit{Code: 2, Msg: want}, plugintest.ExitOf(err)); diff != "" {
			t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
		}
		if !strings.Contains(stderr, "waiting: on a, the credential for b") {
			t.Errorf("stderr shows no progress: %q", stderr)
		}
		if err := f.Cluster("b").Client.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: "a"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("b's Secret a: %v, want not found", err)
		}
	})
}

func TestLegacyCredential(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good := legacyCredential(t, "a", "b", "x", tokenExpires)
	with := func(mutate func(*corev1.Secret)) *corev1.Secret {
		s := good.DeepCopy()
		mutate(s)
		return s
	}
	tests := []struct {
		name    string
		objs    []client.Object
		wantWhy string
	}{
		{name: "usable", objs: []client.Object{good}},
		{name: "missing", wantWhy: "is missing"},
		{name: "for another peer", objs: []client.Object{with(func(s *corev1.Secret) { s.Annotations[v1alpha1.PeerClusterIDAnnotation] = strings.Repeat("x", 300) })},
			wantWhy: `is issued to cluster "` + strings.Repeat("x", 64) + `"..., not id-b`},
		{name: "another type", objs: []client.Object{with(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })},
			wantWhy: `has type "Opaque", not "k8s.cisco.com/cluster-registry-secret"`},
		{name: "no kubeconfig", objs: []client.Object{with(func(s *corev1.Secret) { s.Data = nil })},
			wantWhy: "holds no valid kubeconfig: "},
		{name: "no expiry", objs: []client.Object{with(func(s *corev1.Secret) {
			s.Data[v1alpha1.KubeconfigKey] = kubeconfigWithToken(t, "a", kubefake.Host("a"), seedToken("a"))
		})}, wantWhy: "holds a token that states no expiry"},
		{name: "expired", objs: []client.Object{legacyCredential(t, "a", "b", "x", now)},
			wantWhy: "holds a token that expired at 2026-01-02T03:04:05Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := kubefake.New([]string{"a"}, tt.objs...)
			s := &side{name: "a", client: f.Cluster("a").Client}
			got, why := s.legacyCredential(context.Background(), v1alpha1.DefaultNamespace, "id-b", now)
			if (got != nil) != (tt.wantWhy == "") {
				t.Fatalf("credential %v (%s), want one: %v", got != nil, why, tt.wantWhy == "")
			}
			if !strings.HasPrefix(why, tt.wantWhy) || (tt.wantWhy == "" && why != "") {
				t.Errorf("why %q, want %q", why, tt.wantWhy)
			}
		})
	}
}

func TestLegacyCopies(t *testing.T) {
	shared, err := buildCopies(localCluster("a", "id-a", "https://10.0.0.1:6443"), readerSecret(t, "a", "https://10.0.0.1:6443"), v1alpha1.DefaultNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	cred := legacyCredential(t, "a", "b", "x", tokenExpires)
	got, err := legacyCopies(shared, cred, "https://a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := shared.Secret.DeepCopy()
	want.Annotations = map[string]string{
		v1alpha1.TokenExpiresAtAnnotation: "2030-01-02T03:04:05Z",
		v1alpha1.TokenIssuedAtAnnotation:  "2026-01-01T00:00:00.000000000Z",
	}
	rewritten, _, err := rewriteServer(cred.Data[v1alpha1.KubeconfigKey], "https://a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want.Data = map[string][]byte{v1alpha1.KubeconfigKey: rewritten}
	if diff := cmp.Diff(want, got.Secret); diff != "" {
		t.Errorf("Secret (-want +got):\n%s", diff)
	}
	if got.Cluster != shared.Cluster {
		t.Errorf("the Cluster is not A's copy")
	}
	if cred.Data[v1alpha1.KubeconfigKey] == nil || string(cred.Data[v1alpha1.KubeconfigKey]) == string(rewritten) {
		t.Errorf("the credential itself was changed, or the server not rewritten")
	}
}

func TestCheckNames(t *testing.T) {
	long := strings.Repeat("a", 300)
	tests := []struct {
		name string
		edit func(*v1alpha1.Cluster)
		want string
	}{
		{name: "valid", edit: func(*v1alpha1.Cluster) {}},
		{name: "the Cluster's name", edit: func(c *v1alpha1.Cluster) { c.Name = "Not_Valid" },
			want: `the local Cluster "Not_Valid" on context b has no valid name: a lowercase RFC 1123 subdomain`},
		{name: "a long Secret name", edit: func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.SecretRef.Name = long },
			want: `the local Cluster b on context b names no valid reader Secret (namespace "cluster-registry", name "` + long[:64] + `"...)`},
		{name: "a Secret namespace", edit: func(c *v1alpha1.Cluster) { c.Spec.AuthInfo.SecretRef.Namespace = "a.b" },
			want: `the local Cluster b on context b names no valid reader Secret (namespace "a.b", name "b")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := localCluster("b", "id-b", "https://b.example")
			tt.edit(c)
			err := (&side{name: "b", local: c}).checkNames()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tt.want) || (tt.want == "" && got != "") {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
}
