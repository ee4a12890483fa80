package credentials

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{Names: []string{"east", "west", "north"}, CRDDirectoryPaths: []string{"../../../manifests/crds"}}, &bed))
}

const ns = v1alpha1.DefaultNamespace

// whoAmI asks the API server of cluster c who the token is (a SelfSubjectReview): the
// user name, or an error (401 when the token is rejected).
func whoAmI(ctx context.Context, c *testbed.Cluster, token string) (string, error) {
	cfg := &rest.Config{Host: c.Host(), TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData()}, BearerToken: token, Timeout: 5 * time.Second}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// held is a token a cluster holds: where it is kept, never the token itself in output.
type held struct {
	where string
	token string
}

// keyOf returns the private key of the member cl is the API server of, as its admin
// reads it from the readers namespace.
func keyOf(t *testing.T, cl client.Client) *seal.Key {
	t.Helper()
	var s corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(ns), Name: v1alpha1.ReaderKeySecretName}, &s); err != nil {
		t.Fatalf("the key Secret: %v", err)
	}
	k, err := seal.ParsePrivateKey(s.Data[v1alpha1.PrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tokenIn returns the token of the reader kubeconfig Secret s holds: in the clear, or
// sealed by issuer to recipient and opened with key (nil: a sealed one is not opened).
func tokenIn(s *corev1.Secret, key *seal.Key, issuer, recipient types.UID) (string, bool) {
	raw := s.Data[v1alpha1.KubeconfigKey]
	if sealed := s.Data[v1alpha1.SealedKubeconfigKey]; len(sealed) > 0 {
		if key == nil {
			return "", false
		}
		var err error
		if raw, err = key.Open(issuer, recipient, sealed); err != nil {
			return "", false
		}
	}
	r, ok := kubeconfig.Read(raw)
	return r.Token, ok && r.Token != ""
}

// tokensHeld returns every token in the reader kubeconfigs of cl's registry namespace,
// the sealed credentials opened with the member's key (id is the member's cluster ID).
func tokensHeld(t *testing.T, cl client.Client, id types.UID) []held {
	t.Helper()
	var secrets corev1.SecretList
	if err := cl.List(context.Background(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	key := keyOf(t, cl)
	var out []held
	for i, s := range secrets.Items {
		if token, ok := tokenIn(&secrets.Items[i], key, types.UID(s.Annotations[v1alpha1.OwnershipAnnotation]), id); ok {
			out = append(out, held{where: "Secret " + s.Name, token: token})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

// TestPerPeerCredentials: every member reads every other with a reader identity of its
// own (the peer's API server names it), and after `leave`, every token the departed
// cluster held is rejected by every member's API server within seconds, while the
// remaining members keep reading each other.
func TestPerPeerCredentials(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"east", "west", "north"}
	cl, controllers := harness.FormGroupControllers(t, bed, nil, names...)
	parent := t // a controller restarted by a subtest runs until the whole test ends
	ctx := context.Background()
	ids := map[string]types.UID{}
	for _, n := range names {
		id, err := bed.Cluster(n).KubeSystemUID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}

	t.Run("each member reads each peer as itself", func(t *testing.T) {
		harness.Eventually(t, 60*time.Second, "every member holds a credential of its own from every peer, and the peer's API server names it", func() error {
			for _, reader := range names {
				for _, x := range names {
					if x == reader {
						continue
					}
					var s corev1.Secret
					if err := cl[reader].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids[x])}, &s); err != nil {
						return fmt.Errorf("%s: credential from %s: %w", reader, x, err)
					}
					if len(s.Data[v1alpha1.KubeconfigKey]) != 0 {
						return fmt.Errorf("%s keeps its credential from %s in the clear, where its own peers read it", reader, x)
					}
					token, ok := tokenIn(&s, keyOf(t, cl[reader]), ids[x], ids[reader])
					if !ok {
						return fmt.Errorf("%s: credential from %s does not open with %s's key", reader, x, reader)
					}
					user, err := whoAmI(ctx, bed.Cluster(x), token)
					if err != nil {
						return fmt.Errorf("%s's credential from %s: %w", reader, x, err)
					}
					want := "system:serviceaccount:" + v1alpha1.ReadersNamespace(ns) + ":" + v1alpha1.ReaderServiceAccountName(ids[reader])
					if user != want {
						return fmt.Errorf("%s's credential from %s is user %q, want %q", reader, x, user, want)
					}
				}
			}
			return nil
		})
		// Eventually: a connection that moves to the credential its peer issued
		// reconnects, and is "not connected yet" for a moment.
		groupWhole(t, cl, names)
		// ReaderKeyReady: each member's own Cluster says its key is advertised, and each
		// names on its Cluster of every peer the key it seals that peer's credential to.
		harness.Eventually(t, 30*time.Second, "every Cluster's ReaderKeyReady names the key it is about", func() error {
			for _, m := range names {
				for _, c := range names {
					var got v1alpha1.Cluster
					if err := cl[m].Get(ctx, client.ObjectKey{Name: c}, &got); err != nil {
						return err
					}
					rk, ok := conditions.Get(got.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
					if fp := seal.Fingerprint(keyOf(t, cl[c]).PublicKey()); !ok || rk.Status != corev1.ConditionTrue ||
						rk.Reason != v1alpha1.ReasonReaderKeyAdvertised || !strings.Contains(rk.Message, fp) {
						return fmt.Errorf("on %s, Cluster %s's ReaderKeyReady is %+v, want True, %s, naming %s", m, c, rk, v1alpha1.ReasonReaderKeyAdvertised, fp)
					}
					// ReaderCredentialReady: every peer is read with the credential it
					// issued, not the bootstrap one.
					rc, ok := conditions.Get(got.Status.Conditions, v1alpha1.ClusterConditionReaderCredentialReady)
					switch {
					case c == m && ok:
						return fmt.Errorf("on %s, its own Cluster has a ReaderCredentialReady condition: %+v", m, rc)
					case c == m:
						// WithinSizing: the controller compares its limits (whatever this
						// machine's cgroup says) with the sizing for its two peers.
						if ws, ok := conditions.Get(got.Status.Conditions, v1alpha1.ClusterConditionWithinSizing); !ok || !strings.HasPrefix(ws.Message, fmt.Sprintf("%d peers", len(names)-1)) {
							return fmt.Errorf("on %s, its own Cluster's WithinSizing is %+v (present %v), want one about %d peers", m, ws, ok, len(names)-1)
						}
					case c != m && (!ok || rc.Status != corev1.ConditionTrue || rc.Reason != v1alpha1.ReasonIssuedCredential):
						return fmt.Errorf("on %s, Cluster %s's ReaderCredentialReady is %+v, want True, %s", m, c, rc, v1alpha1.ReasonIssuedCredential)
					}
				}
			}
			return nil
		})
	})

	t.Run("a member cannot use the credential a peer issued to another member", func(t *testing.T) {
		// north's admin reads, through the credentials north holds, every Secret east and
		// west let their readers read, and tries every token it finds, opening what it
		// can with north's key. None of them is the reader east issued west or west
		// issued east: north cannot act as west on east, nor as east on west.
		northKey := keyOf(t, cl["north"])
		var found []held
		for _, x := range []string{"east", "west"} {
			var received corev1.Secret
			if err := cl["north"].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids[x])}, &received); err != nil {
				t.Fatal(err)
			}
			token, ok := tokenIn(&received, northKey, ids[x], ids["north"])
			if !ok {
				t.Fatalf("north's credential from %s does not open", x)
			}
			cfg := &rest.Config{Host: bed.Cluster(x).Host(), TLSClientConfig: rest.TLSClientConfig{CAData: bed.Cluster(x).CAData()}, BearerToken: token}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("north reading %s's Secrets: %v", x, err)
			}
			for i, s := range secrets.Items {
				seen := map[string]bool{}
				for _, issuer := range ids {
					for _, recipient := range ids {
						if token, ok := tokenIn(&secrets.Items[i], northKey, issuer, recipient); ok && !seen[token] {
							seen[token] = true
							found = append(found, held{where: x + "'s Secret " + s.Name, token: token})
						}
					}
				}
			}
		}
		if len(found) == 0 {
			t.Fatal("north found no token at all: the test reads nothing")
		}
		for _, h := range found {
			for _, pair := range [][2]string{{"east", "west"}, {"west", "east"}} {
				user, err := whoAmI(ctx, bed.Cluster(pair[0]), h.token)
				if err != nil {
					continue
				}
				if victim := "system:serviceaccount:" + v1alpha1.ReadersNamespace(ns) + ":" + v1alpha1.ReaderServiceAccountName(ids[pair[1]]); user == victim {
					t.Errorf("north uses %s to act on %s as %s (%s)", h.where, pair[0], pair[1], user)
				}
			}
		}
	})

	t.Run("a stolen shared reader token reads the membership and sealed credentials, nothing else", func(t *testing.T) {
		// Every reader of north's registry namespace (any token north issued, or north's
		// own shared one) reads north's copy of east's shared reader Secret, in clear: the
		// seed's format, relayed so that members can find each other. Its token is a
		// bootstrap credential on east.
		var relayed corev1.Secret
		if err := cl["north"].Get(ctx, client.ObjectKey{Namespace: ns, Name: "east"}, &relayed); err != nil {
			t.Fatal(err)
		}
		token, ok := tokenIn(&relayed, nil, "", "")
		if !ok {
			t.Fatal("north's copy of east's shared reader Secret holds no token")
		}
		user, err := whoAmI(ctx, bed.Cluster("east"), token)
		if err != nil {
			t.Fatalf("east's shared token: %v", err)
		}
		if want := "system:serviceaccount:" + ns + ":" + v1alpha1.ReaderName; user != want {
			t.Fatalf("east's shared token is %q, want %q", user, want)
		}
		thief := harness.ReaderClient(t, relayed.Data[v1alpha1.KubeconfigKey])
		// A canary in east's registry namespace, which east's own readers may read.
		canary := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bootstrap-canary"}, StringData: map[string]string{"k": "v"}}
		if err := cl["east"].Create(ctx, canary); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		// What it may read: the Clusters, the kube-system namespace, and by name the
		// credentials east issued, each sealed to its peer.
		if err := thief.List(ctx, &v1alpha1.ClusterList{}); err != nil {
			t.Errorf("the bootstrap credential cannot list east's Clusters: %v", err)
		}
		if err := thief.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{}); err != nil {
			t.Errorf("the bootstrap credential cannot get kube-system: %v", err)
		}
		for _, peer := range []string{"west", "north"} {
			var issued corev1.Secret
			if err := thief.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.IssuedReaderSecretName(ids[peer])}, &issued); err != nil {
				t.Errorf("the bootstrap credential cannot get the credential east issued %s: %v", peer, err)
				continue
			}
			if len(issued.Data[v1alpha1.KubeconfigKey]) != 0 || len(issued.Data[v1alpha1.SealedKubeconfigKey]) == 0 {
				t.Errorf("the credential east issued %s is not sealed: data keys %v", peer, len(issued.Data))
			}
		}
		// What it may not: any other Secret (its own successor, the canary, the relayed
		// copies of the other members' shared tokens), a list of Secrets, the rules, the
		// features, any other kind, and any write.
		forbidden := map[string]error{
			"list Secrets":                     thief.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
			"get its own successor":            thief.Get(ctx, client.ObjectKey{Namespace: ns, Name: "east"}, &corev1.Secret{}),
			"get the canary":                   thief.Get(ctx, client.ObjectKey{Namespace: ns, Name: canary.Name}, &corev1.Secret{}),
			"get west's relayed shared Secret": thief.Get(ctx, client.ObjectKey{Namespace: ns, Name: "west"}, &corev1.Secret{}),
			"list ResourceSyncRules":           thief.List(ctx, &v1alpha1.ResourceSyncRuleList{}),
			"list ClusterFeatures":             thief.List(ctx, &v1alpha1.ClusterFeatureList{}),
			"list ConfigMaps":                  thief.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)),
			"list namespaces":                  thief.List(ctx, &corev1.NamespaceList{}),
			"create a ConfigMap":               thief.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"}}),
		}
		keys := make([]string, 0, len(forbidden))
		for k := range forbidden {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, what := range keys {
			if err := forbidden[what]; !apierrors.IsForbidden(err) {
				t.Errorf("the bootstrap credential may %s on east: %v, want 403", what, err)
			}
		}
		// east's peers read east with credentials of their own, not with this one.
		for _, reader := range []string{"west", "north"} {
			var c v1alpha1.Cluster
			if err := cl[reader].Get(ctx, client.ObjectKey{Name: "east"}, &c); err != nil {
				t.Fatal(err)
			}
			if ready, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReady); !ok || strings.Contains(ready.Message, "bootstrap credential") {
				t.Errorf("%s reads east with its bootstrap credential: %+v", reader, ready)
			}
		}
	})

	t.Run("a member that relays another member's Cluster with its own key gets nothing it can open", func(t *testing.T) {
		// north (the hostile member H) rewrites its copy of west's (X's) Cluster to
		// advertise north's key, and east (the victim V) learns west from north's copy.
		// east still seals west's credential to west's real key only: north opens none of
		// the versions east writes, and west keeps reading east with it.
		const h, x, v = "north", "west", "east"
		hKey, xKey := keyOf(t, cl[h]), keyOf(t, cl[x])
		xFingerprint := seal.Fingerprint(xKey.PublicKey())
		issued := v1alpha1.IssuedReaderSecretName(ids[x])
		restore := func() {
			// Undo the attack: north and east read west from west itself again (east
			// learns it from north again if its copy is still missing).
			for _, m := range []string{h, v} {
				var c v1alpha1.Cluster
				if err := cl[m].Get(ctx, client.ObjectKey{Name: x}, &c); apierrors.IsNotFound(err) {
					continue
				}
				editCluster(t, cl[m], x, func(c *v1alpha1.Cluster) {
					delete(c.Annotations, v1alpha1.ClusterDisabledAnnotation)
					c.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = xKey.PublicKey()
				})
			}
			groupWhole(t, cl, names)
		}
		t.Cleanup(func() {
			if t.Failed() {
				restore()
			}
		})

		// Every version, on east, of its copy of west's Cluster and of the credential east
		// issues west, from now on.
		var (
			mu       sync.Mutex
			poisoned int // versions of east's copy of west that advertise north's key
			versions []corev1.Secret
		)
		watchCtx, stopWatching := context.WithCancel(ctx)
		defer stopWatching()
		watched := []<-chan struct{}{
			watchOn(t, watchCtx, v, &v1alpha1.ClusterList{}, func(o client.Object) {
				mu.Lock()
				defer mu.Unlock()
				if o.GetAnnotations()[v1alpha1.ReaderPublicKeyAnnotation] == hKey.PublicKey() {
					poisoned++
				}
			}, client.MatchingFields{"metadata.name": x}),
			watchOn(t, watchCtx, v, &corev1.SecretList{}, func(o client.Object) {
				mu.Lock()
				defer mu.Unlock()
				versions = append(versions, *o.(*corev1.Secret).DeepCopy())
			}, client.InNamespace(ns), client.MatchingFields{"metadata.name": issued}),
		}
		var current corev1.Secret
		if err := cl[v].Get(ctx, client.ObjectKey{Namespace: ns, Name: issued}, &current); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		versions = append(versions, current)
		mu.Unlock()

		// disable disables west on member m, as m's admin does, and returns m's Cluster
		// of west once m's controller has dropped its connection to west: it then no
		// longer refreshes the copy from west's own Cluster.
		disable := func(m string) *v1alpha1.Cluster {
			editCluster(t, cl[m], x, func(c *v1alpha1.Cluster) { c.Annotations[v1alpha1.ClusterDisabledAnnotation] = "true" })
			var c v1alpha1.Cluster
			harness.Eventually(t, 30*time.Second, m+" disables west", func() error {
				if err := cl[m].Get(ctx, client.ObjectKey{Name: x}, &c); err != nil {
					return err
				}
				if c.Status.State != v1alpha1.ClusterStateDisabled {
					return fmt.Errorf("west is %q on %s", c.Status.State, m)
				}
				return nil
			})
			return &c
		}

		// north's admin disables west on north (a local decision: north's controller stops
		// refreshing the copy from west) and writes north's key into its copy: north now
		// serves every member that reads it a Cluster of west advertising north's key.
		disable(h)
		editCluster(t, cl[h], x, func(c *v1alpha1.Cluster) { c.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = hKey.PublicKey() })

		// east learns west anew, from north: as a cluster that joins through north does.
		// east's admin disables west on east first, so that east drops its connection to
		// west and west's own copy is not read, then deletes east's copy of west: north's
		// copy is then the only source of west's Cluster. east's copy advertises north's
		// key until east reads west's own Cluster; a few times over, since how long that
		// lasts depends on east's reconcilers.
		const rounds = 3
		for round := 1; round <= rounds; round++ {
			before := disable(v)
			if err := cl[v].Delete(ctx, before); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, 60*time.Second, fmt.Sprintf("round %d: east learns west again, connects to it and reads its key from it", round), func() error {
				var c v1alpha1.Cluster
				if err := cl[v].Get(ctx, client.ObjectKey{Name: x}, &c); err != nil {
					return err
				}
				if c.UID == before.UID {
					return errors.New("east's copy of west is not deleted yet")
				}
				if got := c.Annotations[v1alpha1.ReaderPublicKeyAnnotation]; got != xKey.PublicKey() {
					return fmt.Errorf("east's copy of west advertises %q, want west's own key", got)
				}
				rk, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
				if !ok || rk.Status != corev1.ConditionTrue || !strings.Contains(rk.Message, xFingerprint) {
					return fmt.Errorf("west's ReaderKeyReady on east is %+v, want True naming west's key %s", rk, xFingerprint)
				}
				return harness.Members(cl[v], v, names...)
			})
		}
		stopWatching()
		for _, w := range watched {
			<-w
		}

		mu.Lock()
		defer mu.Unlock()
		if poisoned < rounds {
			t.Fatalf("east's copy of west advertised north's key in %d versions, want one each round at least (%d): east did not learn west from north, the test proves nothing", poisoned, rounds)
		}
		for i, s := range versions {
			sealed := s.Data[v1alpha1.SealedKubeconfigKey]
			if len(sealed) == 0 || len(s.Data[v1alpha1.KubeconfigKey]) != 0 {
				t.Errorf("version %d (resourceVersion %s) of the credential east issues west is not sealed", i, s.ResourceVersion)
				continue
			}
			if got := s.Annotations[v1alpha1.SealedToAnnotation]; got != xFingerprint {
				t.Errorf("version %d (resourceVersion %s) of the credential east issues west is sealed to %s, want west's key %s (north's is %s)",
					i, s.ResourceVersion, got, xFingerprint, seal.Fingerprint(hKey.PublicKey()))
			}
			for _, recipient := range []types.UID{ids[x], ids[h]} {
				if _, err := hKey.Open(ids[v], recipient, sealed); err == nil {
					t.Errorf("north opens version %d (resourceVersion %s) of the credential east issues west", i, s.ResourceVersion)
				}
			}
		}

		// west still reads east with the credential east issued it.
		restore()
		final := versions[len(versions)-1]
		harness.Eventually(t, 30*time.Second, "west holds east's credential and reads east as itself with it", func() error {
			var received corev1.Secret
			if err := cl[x].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids[v])}, &received); err != nil {
				return err
			}
			if !bytes.Equal(received.Data[v1alpha1.SealedKubeconfigKey], final.Data[v1alpha1.SealedKubeconfigKey]) {
				return errors.New("west does not hold the credential east issues it")
			}
			token, ok := tokenIn(&received, xKey, ids[v], ids[x])
			if !ok {
				return errors.New("west's credential from east does not open with west's key")
			}
			user, err := whoAmI(ctx, bed.Cluster(v), token)
			if err != nil {
				return err
			}
			if want := "system:serviceaccount:" + v1alpha1.ReadersNamespace(ns) + ":" + v1alpha1.ReaderServiceAccountName(ids[x]); user != want {
				return fmt.Errorf("west's credential from east is %q, want %q", user, want)
			}
			return harness.Members(cl[x], x, names...)
		})
	})

	t.Run("a peer that advertises a malformed key is issued nothing, and its Cluster on the issuer says so", func(t *testing.T) {
		// west's controller is stopped (nothing advertises west's key again) and west's
		// admin writes a malformed key on west's own Cluster, as a broken or hostile west
		// would: east reads it from west, issues west nothing, and says why on its
		// Cluster of west.
		const x, v = "west", "east"
		xKey := keyOf(t, cl[x])
		issued := v1alpha1.IssuedReaderSecretName(ids[x])
		var before corev1.Secret
		if err := cl[v].Get(ctx, client.ObjectKey{Namespace: ns, Name: issued}, &before); err != nil {
			t.Fatal(err)
		}
		logBefore, err := controllers[v].Log()
		if err != nil {
			t.Fatal(err)
		}
		controllers[x].Stop(t)
		restarted := false
		restore := func() {
			editCluster(t, cl[x], x, func(c *v1alpha1.Cluster) { c.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = xKey.PublicKey() })
			if !restarted {
				restarted = true
				controllers[x] = harness.Serve(parent, bed.Cluster(x))
				harness.Eventually(t, 30*time.Second, "west's controller leads again", func() error {
					log, err := controllers[x].Log()
					if err == nil && !strings.Contains(log, "leading: starting the reconcilers") {
						err = errors.New("not leading yet")
					}
					return err
				})
			}
			groupWhole(t, cl, names)
		}
		t.Cleanup(func() {
			if t.Failed() {
				restore()
			}
		})
		const malformed = seal.PublicKeyPrefix + "not-a-key"
		editCluster(t, cl[x], x, func(c *v1alpha1.Cluster) { c.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = malformed })
		harness.Eventually(t, 30*time.Second, "east's Cluster of west says its key is malformed, and east's credentials reconciler refuses it", func() error {
			var c v1alpha1.Cluster
			if err := cl[v].Get(ctx, client.ObjectKey{Name: x}, &c); err != nil {
				return err
			}
			rk, _ := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
			if rk.Status != corev1.ConditionFalse || rk.Reason != v1alpha1.ReasonReaderKeyInvalid || !strings.Contains(rk.Message, v1alpha1.ReaderPublicKeyAnnotation) {
				return fmt.Errorf("west's ReaderKeyReady on east is %+v, want False, %s", rk, v1alpha1.ReasonReaderKeyInvalid)
			}
			log, err := controllers[v].Log()
			if err != nil {
				return err
			}
			if !strings.Contains(strings.TrimPrefix(log, logBefore), "no credential can be sealed to") {
				return errors.New("east's controller has not refused west's key yet")
			}
			return nil
		})
		var after corev1.Secret
		if err := cl[v].Get(ctx, client.ObjectKey{Namespace: ns, Name: issued}, &after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before.ResourceVersion {
			t.Errorf("east wrote west's credential (resourceVersion %s, was %s) for a malformed key", after.ResourceVersion, before.ResourceVersion)
		}

		restore()
		harness.Eventually(t, 30*time.Second, "east's Cluster of west names west's key again", func() error {
			var c v1alpha1.Cluster
			if err := cl[v].Get(ctx, client.ObjectKey{Name: x}, &c); err != nil {
				return err
			}
			rk, _ := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
			if fp := seal.Fingerprint(xKey.PublicKey()); rk.Status != corev1.ConditionTrue || !strings.Contains(rk.Message, fp) {
				return fmt.Errorf("west's ReaderKeyReady on east is %+v, want True naming %s", rk, fp)
			}
			return nil
		})
	})

	t.Run("a stolen credential does not read its successor, and revoking it cuts it off", func(t *testing.T) {
		// A thief holds west's credential to east (the token, not west's key) and east's
		// shared reader token, read with it.
		var received corev1.Secret
		if err := cl["west"].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids["east"])}, &received); err != nil {
			t.Fatal(err)
		}
		stolen, ok := tokenIn(&received, keyOf(t, cl["west"]), ids["east"], ids["west"])
		if !ok {
			t.Fatal("west's credential from east does not open")
		}
		asThief, err := kubernetes.NewForConfig(&rest.Config{Host: bed.Cluster("east").Host(), TLSClientConfig: rest.TLSClientConfig{CAData: bed.Cluster("east").CAData()}, BearerToken: stolen})
		if err != nil {
			t.Fatal(err)
		}
		shared, err := asThief.CoreV1().Secrets(ns).Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the thief reading east's shared reader Secret: %v", err)
		}
		sharedToken, ok := tokenIn(shared, nil, "", "")
		if !ok {
			t.Fatal("east's shared reader Secret holds no token")
		}
		// north's credential to east, which the revocation must not disturb.
		var northReceived corev1.Secret
		if err := cl["north"].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids["east"])}, &northReceived); err != nil {
			t.Fatal(err)
		}
		northToken, _ := tokenIn(&northReceived, keyOf(t, cl["north"]), ids["east"], ids["north"])

		// east issues west a new credential (as at a renewal): the stolen token, still
		// valid, reads only its sealed successor.
		issuedName := v1alpha1.IssuedReaderSecretName(ids["west"])
		before, err := asThief.CoreV1().Secrets(ns).Get(ctx, issuedName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl["east"].Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: issuedName}}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, "east issues west a new credential", func() error {
			s, err := asThief.CoreV1().Secrets(ns).Get(ctx, issuedName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.UID == before.UID {
				return errors.New("not re-issued yet")
			}
			if _, ok := tokenIn(s, nil, "", ""); ok || len(s.Data[v1alpha1.KubeconfigKey]) != 0 {
				t.Fatalf("the stolen token reads west's new credential in the clear")
			}
			if len(s.Data[v1alpha1.SealedKubeconfigKey]) == 0 {
				return errors.New("the new credential is not sealed")
			}
			return nil
		})

		// The revocation of west's access on east, without leave: "kubectl registry
		// revoke" deletes west's reader (east issues west a new one, sealed to west's key)
		// and the shared reader (whose token the thief read), and waits until east's
		// controller has issued both again.
		readers := v1alpha1.ReadersNamespace(ns)
		revoked := []struct{ sa, secret types.NamespacedName }{
			{types.NamespacedName{Namespace: readers, Name: v1alpha1.ReaderServiceAccountName(ids["west"])}, types.NamespacedName{Namespace: ns, Name: issuedName}},
			{types.NamespacedName{Namespace: ns, Name: v1alpha1.ReaderName}, types.NamespacedName{Namespace: ns, Name: "east"}},
		}
		oldUIDs := map[types.NamespacedName]types.UID{}
		for _, x := range revoked {
			var sa corev1.ServiceAccount
			if err := cl["east"].Get(ctx, x.sa, &sa); err != nil {
				t.Fatal(err)
			}
			oldUIDs[x.sa] = sa.UID
		}
		cmd := exec.Command(harness.Binary(t), "revoke", "west", "--kubeconfig", bed.KubeconfigPath, "--context", "east", "--wait", "--timeout", "60s")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("revoke: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
		t.Logf("revoke\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		for _, want := range []string{
			"serviceaccount/" + v1alpha1.ReaderServiceAccountName(ids["west"]) + " deleted on east (every token east issued to west is revoked)\n",
			"serviceaccount/" + v1alpha1.ReaderName + " deleted on east (the shared reader token is revoked; the controller issues a new one)\n",
		} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("revoke's stdout lacks %q:\n%s", want, stdout.String())
			}
		}
		// --wait returned: east holds west's new credential and its new shared token,
		// each issued for the recreated ServiceAccount.
		for _, x := range revoked {
			var sa corev1.ServiceAccount
			var s corev1.Secret
			if err := cl["east"].Get(ctx, x.sa, &sa); err != nil {
				t.Fatalf("after revoke --wait: %v", err)
			}
			if sa.UID == oldUIDs[x.sa] {
				t.Errorf("after revoke --wait, the ServiceAccount %s is still the revoked one (UID %s)", x.sa, sa.UID)
			}
			if err := cl["east"].Get(ctx, x.secret, &s); err != nil {
				t.Fatalf("after revoke --wait: %v", err)
			}
			if got := s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation]; got != string(sa.UID) {
				t.Errorf("after revoke --wait, the Secret %s holds a token of ServiceAccount UID %q, want %q (the recreated %s)", x.secret, got, sa.UID, x.sa)
			}
		}
		harness.Eventually(t, 30*time.Second, "east rejects the stolen tokens", func() error {
			for what, token := range map[string]string{"west's stolen credential": stolen, "east's shared token": sharedToken} {
				if _, err := whoAmI(ctx, bed.Cluster("east"), token); !apierrors.IsUnauthorized(err) {
					return fmt.Errorf("%s: %v, want 401", what, err)
				}
			}
			return nil
		})
		harness.Eventually(t, 60*time.Second, "west reads east again with a new credential of its own", func() error {
			var s corev1.Secret
			if err := cl["west"].Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.ReceivedReaderSecretName(ids["east"])}, &s); err != nil {
				return err
			}
			token, ok := tokenIn(&s, keyOf(t, cl["west"]), ids["east"], ids["west"])
			if !ok || token == stolen {
				return errors.New("west holds no new credential from east yet")
			}
			user, err := whoAmI(ctx, bed.Cluster("east"), token)
			if err != nil {
				return err
			}
			if want := "system:serviceaccount:" + readers + ":" + v1alpha1.ReaderServiceAccountName(ids["west"]); user != want {
				return fmt.Errorf("west's new credential is %q, want %q", user, want)
			}
			return harness.Members(cl["west"], "west", names...)
		})
		if user, err := whoAmI(ctx, bed.Cluster("east"), northToken); err != nil {
			t.Errorf("north's credential to east stopped working when west's was revoked: %v (%s)", err, user)
		}
		// The members hold east's new shared token again (what a new member reads with).
		harness.Eventually(t, 60*time.Second, "east's new shared token reaches the members", func() error {
			for _, m := range []string{"west", "north"} {
				var s corev1.Secret
				if err := cl[m].Get(ctx, client.ObjectKey{Namespace: ns, Name: "east"}, &s); err != nil {
					return err
				}
				token, _ := tokenIn(&s, nil, "", "")
				if _, err := whoAmI(ctx, bed.Cluster("east"), token); err != nil {
					return fmt.Errorf("%s's copy of east's shared token: %w", m, err)
				}
			}
			return nil
		})
	})

	t.Run("after leave every token the departed cluster held is rejected everywhere", func(t *testing.T) {
		tokens := tokensHeld(t, cl["north"], ids["north"])
		members := []string{"east", "west"}
		// The tokens work before: each authenticates at one member at least (the
		// shared reader tokens north copied, and the credentials issued to it).
		accepted := 0
		for _, h := range tokens {
			for _, m := range members {
				if _, err := whoAmI(ctx, bed.Cluster(m), h.token); err == nil {
					accepted++
					break
				}
			}
		}
		if accepted < 2*len(members) {
			t.Fatalf("only %d of north's %d tokens authenticate at a member before it leaves; want the shared and the own credential of each member", accepted, len(tokens))
		}

		start := time.Now()
		// No single member removes another: east records the departure, west confirms it
		// (two of the three members), and then it is in force.
		out, err := exec.Command(harness.Binary(t), "leave", "north", "--kubeconfig", bed.KubeconfigPath, "--context", "east").CombinedOutput()
		if err != nil {
			t.Fatalf("leave: %v\n%s", err, out)
		}
		out, err = exec.Command(harness.Binary(t), "leave", "north", "--confirm", "--kubeconfig", bed.KubeconfigPath, "--context", "west", "--wait", "--timeout", "60s").CombinedOutput()
		if err != nil {
			t.Fatalf("leave --confirm: %v\n%s", err, out)
		}
		harness.Eventually(t, 30*time.Second, "every token north held is rejected by east and west", func() error {
			var still []string
			for _, h := range tokens {
				for _, m := range members {
					_, err := whoAmI(ctx, bed.Cluster(m), h.token)
					if err == nil {
						still = append(still, h.where+" at "+m)
						continue
					}
					if !apierrors.IsUnauthorized(err) {
						return fmt.Errorf("%s at %s: %w", h.where, m, err)
					}
				}
			}
			if len(still) > 0 {
				return errors.New("still accepted: " + strings.Join(still, ", "))
			}
			return nil
		})
		t.Logf("every token north held was rejected by every member %s after leave", time.Since(start).Round(100*time.Millisecond))

		harness.Eventually(t, 60*time.Second, "east and west still read each other", func() error {
			for _, n := range members {
				if err := harness.Members(cl[n], n, members...); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// editCluster changes the Cluster name on the cluster cl is the API server of, as its
// admin does (retried on conflicts with the controller's writes).
// groupWhole waits until every member of names holds exactly the Clusters of names, each
// Ready and ClustersSynced.
func groupWhole(t *testing.T, cl map[string]client.Client, names []string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, "the group is whole again", func() error {
		for _, n := range names {
			if err := harness.Members(cl[n], n, names...); err != nil {
				return err
			}
		}
		return nil
	})
}

func editCluster(t *testing.T, cl client.Client, name string, edit func(*v1alpha1.Cluster)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var c v1alpha1.Cluster
		if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
			return err
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		edit(&c)
		return cl.Update(context.Background(), &c)
	})
	if err != nil {
		t.Fatalf("editing Cluster %s: %v", name, err)
	}
}

// watchOn watches list's kind on the named cluster of the bed until ctx is done, and
// calls seen with every object added or modified. The returned channel closes when the
// watch ends; a watch that ends before ctx is done fails the test.
func watchOn(t *testing.T, ctx context.Context, cluster string, list client.ObjectList, seen func(client.Object), opts ...client.ListOption) <-chan struct{} {
	t.Helper()
	s, err := testbed.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := client.NewWithWatch(rest.CopyConfig(bed.Cluster(cluster).Config), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, list, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						t.Errorf("the watch of %T on %s ended early", list, cluster)
					}
					return
				}
				if o, isObject := e.Object.(client.Object); isObject && (e.Type == watch.Added || e.Type == watch.Modified) {
					seen(o)
				}
			}
		}
	}()
	return done
}
