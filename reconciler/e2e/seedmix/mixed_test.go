package seedmix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/conditions"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var bed *testbed.Bed

// The clusters: "seed" runs the seed's controller, "a" and "b" run ours.
const (
	seedName = "seed"
	nameA    = "a"
	nameB    = "b"
	// mixedNS holds the ConfigMaps the rule syncs.
	mixedNS = "mixed"
)

func TestMain(m *testing.M) {
	if os.Getenv(envSeedSrc) == "" {
		os.Exit(m.Run()) // the test skips: start no API servers
	}
	os.Exit(testbed.Main(m, harness.BedOptions(seedName, nameA, nameB), &bed))
}

// TestMixedGroup forms a group of the seed's controller and two of ours, joined with the
// seed's manual swap, and walks a team's migration (docs/migrate.md): without the admin's
// consent ours issue the seed's member nothing and say so, and join refuses to treat it as
// one of ours; once their admins run join --legacy (the consent, and the credential issued
// in the clear copied to it), every member sees every other Ready (the seed's controller
// no longer shows ours InvalidAuthInfo) and one rule syncs ConfigMaps both ways; then the
// seed's member moves to ours. The subtests build on each other.
func TestMixedGroup(t *testing.T) {
	s := findSeed(t)
	ctx := context.Background()
	seedCl := s.install(t, bed.Cluster(seedName))
	stopSeed := s.serve(t, bed.Cluster(seedName))
	a, b := harness.Install(t, bed.Cluster(nameA)), harness.Install(t, bed.Cluster(nameB))
	harness.Serve(t, bed.Cluster(nameA))
	harness.Serve(t, bed.Cluster(nameB))
	ours := map[string]client.Client{nameA: a, nameB: b}
	all := map[string]client.Client{seedName: seedCl, nameA: a, nameB: b}

	seedID, err := bed.Cluster(seedName).KubeSystemUID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Every cluster lets its peers read ConfigMaps and its controller write them, as the
	// seed's README has its users do.
	for name, cl := range all {
		grantConfigMaps(t, cl, name)
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mixedNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	t.Run("every member bootstraps", func(t *testing.T) {
		harness.Eventually(t, 90*time.Second, "the seed's member provisions its Cluster and reader Secret", func() error {
			return seedLocalReady(seedCl, seedName)
		})
		for n, cl := range ours {
			harness.Eventually(t, 60*time.Second, n+" bootstraps", func() error { return harness.LocalReady(cl, n) })
		}
	})

	t.Run("the seed's manual swap joins them", func(t *testing.T) {
		for _, n := range []string{nameA, nameB} {
			harness.Swap(t, seedCl, ours[n], seedName)
			readmeSwap(t, ours[n], seedCl, n)
		}
		harness.Swap(t, a, b, nameA)
		harness.Swap(t, b, a, nameB)
	})

	t.Run("without consent ours issue the seed's member nothing and say so", func(t *testing.T) {
		for n, cl := range ours {
			harness.Eventually(t, 60*time.Second, n+" says why it issues the seed's member nothing", func() error {
				var c v1alpha1.Cluster
				if err := cl.Get(ctx, client.ObjectKey{Name: seedName}, &c); err != nil {
					return err
				}
				cond, ok := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
				if !ok || cond.Status != corev1.ConditionFalse || cond.Reason != v1alpha1.ReasonNoReaderKey {
					return fmt.Errorf("on %s, Cluster %s: ReaderKeyReady %+v, want False %s", n, seedName, cond, v1alpha1.ReasonNoReaderKey)
				}
				if !strings.Contains(cond.Message, v1alpha1.LegacyPeerAnnotation) {
					return fmt.Errorf("on %s, Cluster %s: ReaderKeyReady does not say how to consent: %s", n, seedName, cond.Message)
				}
				return nil
			})
			// The seed's controller cannot read it either: the shared reader Secret it
			// holds is a bootstrap credential, refused listing Namespaces.
			if state, msg, err := seedPeerState(seedCl, n); err != nil || state == "Ready" {
				t.Errorf("the seed's member shows %s %q (%s, %v) before consent, want it not Ready", n, state, msg, err)
			}
			// Nothing issued, in the clear or sealed, in either namespace.
			for _, ns := range []string{v1alpha1.DefaultNamespace, v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace)} {
				var issued corev1.Secret
				err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.IssuedReaderSecretName(seedID)}, &issued)
				if !apierrors.IsNotFound(err) {
					t.Errorf("on %s, a credential issued to the seed's member without consent: %s/%s (%v)", n, ns, v1alpha1.IssuedReaderSecretName(seedID), err)
				}
			}
		}
	})

	t.Run("join tells the seed's member from ours", func(t *testing.T) {
		// Without --legacy, join refuses the seed's member, and names the flag.
		out, err := runJoin(t, "--context", nameA, "--peer-context", seedName)
		wantExit(t, out, err, "context "+seedName+" runs the seed's cluster-registry-controller", "pass --legacy")
		// --legacy is for a peer that runs the seed's, from a member that runs ours.
		out, err = runJoin(t, "--context", nameA, "--peer-context", nameB, "--legacy")
		wantExit(t, out, err, "context "+nameB+" runs kubectl-registry's controller, not the seed's", "run join without --legacy")
		out, err = runJoin(t, "--context", seedName, "--peer-context", nameA, "--legacy")
		wantExit(t, out, err, "context "+seedName+" runs the seed's cluster-registry-controller", "swap --context and --peer-context")
		for n, cl := range ours {
			var c v1alpha1.Cluster
			if err := cl.Get(ctx, client.ObjectKey{Name: seedName}, &c); err != nil {
				t.Fatal(err)
			}
			if v1alpha1.IsLegacyPeer(&c) {
				t.Errorf("on %s, a refused join named %s a legacy peer", n, seedName)
			}
		}
	})

	// docs/migrate.md, step 5: on each of ours, join --legacy names the seed's member a
	// legacy peer, waits for the credential issued to it in the clear, and writes it on
	// the seed's member as the Secret that member reads ours with.
	t.Run("join --legacy consents and copies the credential", func(t *testing.T) {
		for _, n := range []string{nameA, nameB} {
			out, err := runJoin(t, "--context", n, "--peer-context", seedName, "--legacy", "--wait", "--timeout", "3m")
			if err != nil {
				t.Fatalf("join --legacy of %s: %v\n%s", n, err, out)
			}
			for _, want := range []string{"secret/" + n + " configured on " + seedName, "cluster.clusterregistry.k8s.cisco.com/" + n + " Ready and synced on " + seedName} {
				if !strings.Contains(out, want) {
					t.Errorf("join --legacy of %s does not say %q:\n%s", n, want, out)
				}
			}
		}
		for n, cl := range ours {
			var issued, held corev1.Secret
			key := client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace), Name: v1alpha1.LegacyReaderSecretName(seedID)}
			if err := cl.Get(ctx, key, &issued); err != nil {
				t.Fatalf("on %s, the credential in the clear: %v", n, err)
			}
			if err := seedCl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: n}, &held); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(held.Data[v1alpha1.KubeconfigKey], issued.Data[v1alpha1.KubeconfigKey]) {
				t.Errorf("the seed's member does not hold the credential %s issued it", n)
			}
		}
		// Again: it changes nothing, or only renews the copy.
		out, err := runJoin(t, "--context", nameA, "--peer-context", seedName, "--legacy")
		if err != nil {
			t.Fatalf("join --legacy again: %v\n%s", err, out)
		}
		if !strings.Contains(out, "cluster.clusterregistry.k8s.cisco.com/"+seedName+" unchanged on "+nameA) {
			t.Errorf("join --legacy again rewrote the consent:\n%s", out)
		}
	})

	t.Run("every member sees every other Ready", func(t *testing.T) {
		harness.Eventually(t, 120*time.Second, "the mixed group forms", func() error {
			if err := seedMembers(seedCl, seedName, seedName, nameA, nameB); err != nil {
				return err
			}
			for n, cl := range ours {
				if err := harness.Members(cl, n, seedName, nameA, nameB); err != nil {
					return err
				}
			}
			return nil
		})
		// Each of ours reads the copy of its credential the seed's member holds, and says
		// when it expires.
		for n, cl := range ours {
			harness.Eventually(t, 60*time.Second, n+" states when the seed's member's copy expires", func() error {
				var c v1alpha1.Cluster
				if err := cl.Get(ctx, client.ObjectKey{Name: seedName}, &c); err != nil {
					return err
				}
				cond, _ := conditions.Get(c.Status.Conditions, v1alpha1.ClusterConditionReaderKeyReady)
				if !strings.Contains(cond.Message, "The credential the peer holds (Secret ") || !strings.Contains(cond.Message, " expires at ") {
					return fmt.Errorf("on %s, the seed's member's ReaderKeyReady says: %s", n, cond.Message)
				}
				return nil
			})
		}
		// status shows which peers are legacy.
		out, err := exec.Command(harness.Binary(t), "status", "--kubeconfig", bed.KubeconfigPath, "--context", nameA).CombinedOutput()
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		if !regexp.MustCompile(`(?m)^` + seedName + `\s+\S+\s+Peer \(legacy\)\s+Ready`).Match(out) {
			t.Errorf("status does not show %s a Ready legacy peer:\n%s", seedName, out)
		}
	})

	t.Run("ours never run the seed's own membership rules", func(t *testing.T) {
		// The built-in rule copies every member's rules, the seed's core rules too; they
		// would copy the seed's reader Secrets into ours.
		for n, cl := range ours {
			harness.Eventually(t, 60*time.Second, n+" refuses the seed's core rules", func() error {
				var rules v1alpha1.ResourceSyncRuleList
				if err := cl.List(ctx, &rules, client.MatchingLabels{v1alpha1.SeedCoreSyncLabel: "true"}); err != nil {
					return err
				}
				if len(rules.Items) == 0 {
					return fmt.Errorf("no copy of the seed's core rules on %s yet", n)
				}
				for _, r := range rules.Items {
					if !meta.IsStatusConditionFalse(r.Status.Conditions, v1alpha1.RuleConditionAllowed) {
						return fmt.Errorf("on %s, the seed's rule %s is not refused: %+v", n, r.Name, r.Status.Conditions)
					}
				}
				return nil
			})
		}
	})

	t.Run("one rule syncs ConfigMaps both ways", func(t *testing.T) {
		// The rule, in the seed's own format, made on every member as the seed's users do.
		for n, cl := range all {
			rule := &v1alpha1.ResourceSyncRule{
				ObjectMeta: metav1.ObjectMeta{Name: "mixed-configmaps"},
				Spec: v1alpha1.ResourceSyncRuleSpec{
					GVK:   v1alpha1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
					Rules: []v1alpha1.SyncRule{{Matches: []v1alpha1.SyncRuleMatch{{Namespaces: []string{mixedNS}}}}},
				},
			}
			if err := cl.Create(ctx, rule); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("the rule on %s: %v", n, err)
			}
		}
		for _, origin := range []string{seedName, nameA} {
			name := "from-" + origin
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mixedNS, Name: name}, Data: map[string]string{"origin": origin}}
			if err := all[origin].Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			for n, cl := range all {
				if n == origin {
					continue
				}
				harness.Eventually(t, 90*time.Second, fmt.Sprintf("ConfigMap %s reaches %s", name, n), func() error {
					var got corev1.ConfigMap
					if err := cl.Get(ctx, types.NamespacedName{Namespace: mixedNS, Name: name}, &got); err != nil {
						return err
					}
					if got.Data["origin"] != origin {
						return fmt.Errorf("on %s, ConfigMap %s holds %v", n, name, got.Data)
					}
					return nil
				})
			}
		}
	})

	// docs/migrate.md, for the seed's member: its chart uninstalled, its membership
	// objects deleted, ours installed with the same cluster name, the consent removed on
	// ours and one join.
	t.Run("the seed's member moves to ours", func(t *testing.T) {
		stopSeed()
		s.uninstall(t, seedCl)
		for _, l := range []client.ObjectList{&v1alpha1.ClusterFeatureList{}, &v1alpha1.ResourceSyncRuleList{}} {
			if err := seedCl.List(ctx, l, client.MatchingLabels{v1alpha1.SeedCoreSyncLabel: "true"}); err != nil {
				t.Fatal(err)
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range items {
				if err := seedCl.Delete(ctx, o.(client.Object)); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		}
		ourCRDs, err := filepath.Glob(filepath.Join(harness.CRDsDir, "*.yaml"))
		if err != nil || len(ourCRDs) == 0 {
			t.Fatalf("our CRDs: %v", err)
		}
		replaceCRDs(t, seedCl, ourCRDs)
		harness.Install(t, bed.Cluster(seedName))
		harness.Serve(t, bed.Cluster(seedName))
		harness.Eventually(t, 60*time.Second, "ours bootstraps on the seed's former member", func() error {
			// The seed's controller left a Ready local Cluster and a reader Secret: wait
			// for ours to advertise its key and to write its own token there.
			var c v1alpha1.Cluster
			if err := seedCl.Get(ctx, client.ObjectKey{Name: seedName}, &c); err != nil {
				return err
			}
			if c.Annotations[v1alpha1.ReaderPublicKeyAnnotation] == "" {
				return fmt.Errorf("the Cluster %s advertises no reader key yet", seedName)
			}
			var s corev1.Secret
			if err := seedCl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: seedName}, &s); err != nil {
				return err
			}
			if s.Annotations[v1alpha1.TokenExpiresAtAnnotation] == "" {
				return fmt.Errorf("the reader Secret %s still holds the seed's token", seedName)
			}
			return harness.LocalReady(seedCl, seedName)
		})
		for n, cl := range ours {
			var c v1alpha1.Cluster
			if err := cl.Get(ctx, client.ObjectKey{Name: seedName}, &c); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(c.DeepCopy())
			delete(c.Annotations, v1alpha1.LegacyPeerAnnotation)
			if err := cl.Patch(ctx, &c, patch); err != nil {
				t.Fatalf("removing the consent on %s: %v", n, err)
			}
		}
		out, err := runJoin(t, "--context", seedName, "--peer-context", nameA)
		if err != nil {
			t.Fatalf("join: %v\n%s", err, out)
		}
		harness.Eventually(t, 120*time.Second, "the group of ours forms", func() error {
			for n, cl := range all {
				if err := harness.Members(cl, n, seedName, nameA, nameB); err != nil {
					return err
				}
			}
			return nil
		})
		for n, cl := range ours {
			harness.Eventually(t, 60*time.Second, n+" revokes the credential in the clear", func() error {
				var s corev1.Secret
				err := cl.Get(ctx, client.ObjectKey{Namespace: v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace), Name: v1alpha1.LegacyReaderSecretName(seedID)}, &s)
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("on %s, the credential in the clear is still there (%v)", n, err)
				}
				return nil
			})
		}
		// Nothing was lost, and the rule syncs from the migrated member.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mixedNS, Name: "after-migration"}, Data: map[string]string{"origin": seedName}}
		if err := seedCl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		for n, cl := range all {
			for _, name := range []string{"from-" + seedName, "from-" + nameA, "after-migration"} {
				harness.Eventually(t, 60*time.Second, fmt.Sprintf("ConfigMap %s on %s", name, n), func() error {
					return cl.Get(ctx, types.NamespacedName{Namespace: mixedNS, Name: name}, &corev1.ConfigMap{})
				})
			}
		}
	})
}

// grantConfigMaps lets the readers of cluster cl read ConfigMaps and its controller
// write them, as the seed's README has its users do: ClusterRoles with the seed's
// reader-aggregated and controller-aggregated labels, which both the seed's and our
// ClusterRoles aggregate.
func grantConfigMaps(t *testing.T, cl client.Client, name string) {
	t.Helper()
	roles := []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: "mixed-configmaps-reader", Labels: map[string]string{v1alpha1.ReaderAggregatedLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "mixed-configmaps-writer", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}}
	for _, role := range roles {
		if err := cl.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("granting ConfigMaps on %s: %v", name, err)
		}
	}
}

// seedLocalReady reports whether the seed's controller made its cluster's Cluster (Local,
// Ready) and the reader Secret it names.
func seedLocalReady(cl client.Client, name string) error {
	var c v1alpha1.Cluster
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		return err
	}
	if c.Status.Type != v1alpha1.ClusterTypeLocal || c.Status.State != v1alpha1.ClusterStateReady {
		return fmt.Errorf("the Cluster %s: type %q state %q: %s", name, c.Status.Type, c.Status.State, c.Status.Message)
	}
	ref := c.Spec.AuthInfo.SecretRef
	var s corev1.Secret
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
		return err
	}
	if len(s.Data[v1alpha1.KubeconfigKey]) == 0 {
		return fmt.Errorf("the reader Secret %s/%s holds no kubeconfig yet", ref.Namespace, ref.Name)
	}
	return nil
}

// runJoin runs the plugin's join on the bed's kubeconfig, allowing the bed's loopback
// addresses, and returns its combined output.
func runJoin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"join", "--kubeconfig", bed.KubeconfigPath, "--allow-loopback"}, args...)
	out, err := exec.Command(harness.Binary(t), args...).CombinedOutput()
	return string(out), err
}

// wantExit checks that a join was refused with exit code 2 and says each of wants.
func wantExit(t *testing.T, out string, err error, wants ...string) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("join: %v, want exit code 2\n%s", err, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("join does not say %q:\n%s", w, out)
		}
	}
}

// readmeSwap copies cluster name's Cluster and then its reader Secret from one cluster to
// another, in the order of the seed's README (`kubectl get cluster ... | kubectl apply`,
// then the same for the Secret). The seed's controller, reconciling the Cluster before
// its Secret exists, writes InvalidAuthInfo (`secrets "NAME" not found`) and writes a
// peer's status again only from a reconcile of that peer that reads it: with a reader
// that cannot list and watch Namespaces there (as ours could not), that status stayed.
func readmeSwap(t *testing.T, from, to client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	var c v1alpha1.Cluster
	if err := from.Get(ctx, client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	ref := c.Spec.AuthInfo.SecretRef
	var s corev1.Secret
	if err := from.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
		t.Fatal(err)
	}
	harness.Clean(&c)
	c.Status = v1alpha1.ClusterStatus{}
	harness.Clean(&s)
	if err := to.Create(ctx, &c); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("copying Cluster %s: %v", name, err)
	}
	// Let the seed's controller see the Cluster without its Secret first, as it does
	// when a user pastes the README's commands one by one.
	time.Sleep(2 * time.Second)
	if err := to.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("copying Secret %s: %v", ref.Name, err)
	}
}

// seedPeerState returns the state and message the seed's controller shows for Cluster
// name on its cluster.
func seedPeerState(cl client.Client, name string) (string, string, error) {
	var c v1alpha1.Cluster
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &c); err != nil {
		return "", "", err
	}
	return string(c.Status.State), c.Status.Message, nil
}
