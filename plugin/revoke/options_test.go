package revoke

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const (
	ns      = v1alpha1.DefaultNamespace
	readers = ns + v1alpha1.ReadersNamespaceSuffix
	// perPeerB is the reader a issued to b; a issued none to c.
	perPeerB = v1alpha1.ReaderServiceAccountPrefix + "id-b"
	// issuedB is the Secret holding b's token on a.
	issuedB = v1alpha1.IssuedReaderSecretPrefix + "id-b"
	// The UIDs of the ServiceAccounts before the revocation.
	uidB      = types.UID("uid-reader-b")
	uidShared = types.UID("uid-shared")
)

// fakeCluster is the Cluster CR of name (clusterID id-<name>), of type typ.
func fakeCluster(name string, typ v1alpha1.ClusterType) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{
			ClusterID: types.UID("id-" + name),
			AuthInfo:  v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: name, Namespace: ns}},
		},
		Status: v1alpha1.ClusterStatus{Type: typ},
	}
}

func serviceAccount(namespace, name string, uid types.UID) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

// tokenSecret is a reader Secret holding a token of the ServiceAccount uid.
func tokenSecret(name string, uid types.UID) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{v1alpha1.TokenServiceAccountUIDAnnotation: string(uid)}}}
}

// fake is a member a of the group a, b, c, x, as a test's run sees it: a issued b a
// reader and has its shared reader; it issued c none; x is a Cluster whose status says
// Local though it is not a's (a stale copy).
type fake struct {
	factory *kubefake.Factory
	client  client.Client

	mu sync.Mutex
	// deletes are the ServiceAccounts deleted (dry runs included), with their options.
	deletes []deleted
	// controller, when set, plays a's controller: a ServiceAccount deleted is recreated
	// at once with the UID "<old>-new", and the Secret of its token is issued for it the
	// second time it is read.
	controller bool
	reads      map[string]int
}

type deleted struct {
	Name         string
	Precondition types.UID
	DryRun       []string
}

func newFake(t *testing.T, opts ...func(*fake)) *fake {
	t.Helper()
	f := &fake{factory: kubefake.New(nil), reads: map[string]int{}}
	for _, o := range opts {
		o(f)
	}
	ks := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "id-a"}}
	objs := []client.Object{
		ks,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readers}},
		fakeCluster("a", v1alpha1.ClusterTypeLocal), fakeCluster("b", v1alpha1.ClusterTypePeer),
		fakeCluster("c", v1alpha1.ClusterTypePeer), fakeCluster("x", v1alpha1.ClusterTypeLocal),
		serviceAccount(readers, perPeerB, uidB),
		serviceAccount(ns, v1alpha1.ReaderName, uidShared),
		tokenSecret(issuedB, uidB),
		tokenSecret("a", uidShared),
	}
	c := f.factory.AddWithFuncs("a", interceptor.Funcs{Delete: f.delete, Get: f.get}, objs...)
	c.Kubernetes = k8sfake.NewClientset(ks.DeepCopy())
	f.factory.Current = "a"
	f.client = c.Client
	return f
}

func (f *fake) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	d := deleted{Name: obj.GetNamespace() + "/" + obj.GetName(), DryRun: do.DryRun}
	if do.Preconditions != nil && do.Preconditions.UID != nil {
		d.Precondition = *do.Preconditions.UID
	}
	f.mu.Lock()
	f.deletes = append(f.deletes, d)
	controller := f.controller
	f.mu.Unlock()
	// The fake client checks no UID precondition: check it as an API server does.
	if do.Preconditions != nil && do.Preconditions.UID != nil {
		var cur corev1.ServiceAccount
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err == nil && cur.UID != *do.Preconditions.UID {
			return apierrors.NewConflict(corev1.Resource("serviceaccounts"), obj.GetName(), nil)
		}
	}
	if err := c.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if controller && len(do.DryRun) == 0 {
		return c.Create(ctx, serviceAccount(obj.GetNamespace(), obj.GetName(), obj.GetUID()+"-new"))
	}
	return nil
}

func (f *fake) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.controller {
		return nil
	}
	f.reads[key.Name]++
	if f.reads[key.Name] < 2 {
		return nil
	}
	sa := map[string]types.NamespacedName{issuedB: {Namespace: readers, Name: perPeerB}, "a": {Namespace: ns, Name: v1alpha1.ReaderName}}[key.Name]
	var cur corev1.ServiceAccount
	if err := c.Get(ctx, sa, &cur); err != nil {
		return nil
	}
	s.Annotations[v1alpha1.TokenServiceAccountUIDAnnotation] = string(cur.UID)
	return c.Update(ctx, s)
}

// serviceAccounts returns the UIDs of the per-peer reader of b and the shared reader on a
// ("" for a missing one).
func (f *fake) serviceAccounts(t *testing.T) (perPeer, shared types.UID) {
	t.Helper()
	for _, x := range []struct {
		key types.NamespacedName
		uid *types.UID
	}{{types.NamespacedName{Namespace: readers, Name: perPeerB}, &perPeer}, {types.NamespacedName{Namespace: ns, Name: v1alpha1.ReaderName}, &shared}} {
		var sa corev1.ServiceAccount
		err := f.client.Get(context.Background(), x.key, &sa)
		switch {
		case err == nil:
			*x.uid = sa.UID
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return perPeer, shared
}

// run runs "kubectl registry revoke <args>" through cobra and cmdutil.RunE, as the plugin
// does, against f.
func (f *fake) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(f.factory, streams)
	o.PollInterval = time.Millisecond
	err = plugintest.RunVerb(t, newCmdRevoke(o), args...)
	return out.String(), errOut.String(), err
}

const revokeHint = "\nSee 'kubectl registry revoke --help' for usage."

// TestCompleteValidate checks every usage error of revoke's Complete and Validate (and of
// its flags and arguments) without API servers: each exits with code 2 and the hint to
// --help, and nothing is deleted.
func TestCompleteValidate(t *testing.T) {
	const label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	const subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	long := "n123456789012345678901234567890123456789012345678901234567" // 58: a label, but not with -readers
	tests := []struct {
		name string
		args []string
		want plugintest.Exit
	}{
		// Arguments and flags.
		{name: "no cluster", args: nil,
			want: plugintest.Exit{Code: 2, Msg: "accepts 1 arg(s), received 0" + revokeHint}},
		{name: "two clusters", args: []string{"b", "c"},
			want: plugintest.Exit{Code: 2, Msg: "accepts 1 arg(s), received 2" + revokeHint}},
		{name: "contexts", args: []string{"b", "--contexts", "a,b"},
			want: plugintest.Exit{Code: 2, Msg: "unknown flag: --contexts" + revokeHint}},
		{name: "bad bool", args: []string{"b", "--keep-shared=maybe"},
			want: plugintest.Exit{Code: 2, Msg: `invalid argument "maybe" for "--keep-shared" flag: strconv.ParseBool: parsing "maybe": invalid syntax` + revokeHint}},
		{name: "bad duration", args: []string{"b", "--timeout", "soon"},
			want: plugintest.Exit{Code: 2, Msg: `invalid argument "soon" for "--timeout" flag: time: invalid duration "soon"` + revokeHint}},
		// Complete.
		{name: "unknown context", args: []string{"b", "--context", "nosuch"},
			want: plugintest.Exit{Code: 2, Msg: `--context "nosuch": no such context in the kubeconfig` + revokeHint}},
		{name: "unknown dry run", args: []string{"b", "--dry-run=all"},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server", got "all"` + revokeHint}},
		{name: "empty dry run", args: []string{"b", "--dry-run="},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server": a value must be set, as in --dry-run=server` + revokeHint}},
		{name: "bare dry run", args: []string{"b", "--dry-run"},
			want: plugintest.Exit{Code: 2, Msg: "flag needs an argument: --dry-run" + revokeHint}},
		// Validate.
		{name: "bad cluster name", args: []string{"Not_A_Cluster"},
			want: plugintest.Exit{Code: 2, Msg: `cluster name "Not_A_Cluster": ` + subdomain + revokeHint}},
		{name: "empty cluster name", args: []string{""},
			want: plugintest.Exit{Code: 2, Msg: `cluster name "": ` + subdomain + revokeHint}},
		{name: "bad namespace", args: []string{"b", "-n", "Not_A_Namespace"},
			want: plugintest.Exit{Code: 2, Msg: `--namespace "Not_A_Namespace": ` + label + revokeHint}},
		{name: "namespace too long for its readers namespace", args: []string{"b", "-n", long},
			want: plugintest.Exit{Code: 2, Msg: `--namespace "` + long + `": its readers namespace ` + long + `-readers: must be no more than 63 characters` + revokeHint}},
		{name: "wait in a client dry run", args: []string{"b", "--dry-run=client", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is deleted to wait for" + revokeHint}},
		{name: "wait in a server dry run", args: []string{"b", "--dry-run=server", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is deleted to wait for" + revokeHint}},
		{name: "no timeout", args: []string{"b", "--wait", "--timeout", "0s"},
			want: plugintest.Exit{Code: 2, Msg: "--timeout must be positive, got 0s" + revokeHint}},
		{name: "every Validate error at once", args: []string{"Not_A_Cluster", "-n", "Not_A_Namespace", "--wait", "--timeout", "-1s"},
			want: plugintest.Exit{Code: 2, Msg: `cluster name "Not_A_Cluster": ` + subdomain + "\n" +
				`--namespace "Not_A_Namespace": ` + label + "\n" +
				"--timeout must be positive, got -1s" + revokeHint}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			stdout, _, err := f.run(t, tt.args...)
			if diff := cmp.Diff(tt.want, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if len(f.deletes) != 0 {
				t.Errorf("deleted %v", f.deletes)
			}
		})
	}
}

// TestRunFake runs revoke against a fake member: what it prints, what it deletes (nothing
// in a dry run) and with which preconditions, and its refusals.
func TestRunFake(t *testing.T) {
	const (
		perPeerLine = "serviceaccount/" + perPeerB + " deleted on a (every token a issued to b is revoked)"
		sharedLine  = "serviceaccount/" + v1alpha1.ReaderName + " deleted on a (the shared reader token is revoked; the controller issues a new one)"
		note        = "The controller of a issues new tokens: b gets a new credential sealed to its key; the other members keep their own credentials.\n"
	)
	both := []deleted{{Name: readers + "/" + perPeerB, Precondition: uidB}, {Name: ns + "/" + v1alpha1.ReaderName, Precondition: uidShared}}
	serverDryRun := []deleted{
		{Name: readers + "/" + perPeerB, Precondition: uidB, DryRun: []string{metav1.DryRunAll}},
		{Name: ns + "/" + v1alpha1.ReaderName, Precondition: uidShared, DryRun: []string{metav1.DryRunAll}},
	}
	tests := []struct {
		name       string
		args       []string
		setup      func(t *testing.T, f *fake)
		want       plugintest.Exit
		wantOut    string
		wantErrOut string
		// wantDeletes are the delete requests sent; wantGone whether each of b's
		// reader and the shared reader is gone afterwards.
		wantDeletes     []deleted
		wantPerPeerGone bool
		wantSharedGone  bool
	}{
		{name: "revoke", args: []string{"b"},
			wantOut:     perPeerLine + "\n" + sharedLine + "\n",
			wantErrOut:  note,
			wantDeletes: both, wantPerPeerGone: true, wantSharedGone: true},
		{name: "keep the shared reader", args: []string{"b", "--keep-shared"},
			wantOut:     perPeerLine + "\n",
			wantErrOut:  note,
			wantDeletes: both[:1], wantPerPeerGone: true},
		{name: "client dry run", args: []string{"b", "--dry-run=client"},
			wantOut:    perPeerLine + " (dry run)\n" + sharedLine + " (dry run)\n",
			wantErrOut: note},
		{name: "server dry run", args: []string{"b", "--dry-run=server"},
			wantOut:     perPeerLine + " (server dry run)\n" + sharedLine + " (server dry run)\n",
			wantErrOut:  note,
			wantDeletes: serverDryRun},
		{name: "server dry run, keep the shared reader", args: []string{"b", "--dry-run=server", "--keep-shared"},
			wantOut:     perPeerLine + " (server dry run)\n",
			wantErrOut:  note,
			wantDeletes: serverDryRun[:1]},
		{name: "explicit context and namespace", args: []string{"b", "--context", "a", "-n", ns},
			wantOut:     perPeerLine + "\n" + sharedLine + "\n",
			wantErrOut:  note,
			wantDeletes: both, wantPerPeerGone: true, wantSharedGone: true},
		{name: "no reader issued yet", args: []string{"c"},
			wantOut:     sharedLine + "\n",
			wantErrOut:  "no reader of c on a to revoke: a has not issued c a reader yet (no ServiceAccount " + readers + "/" + v1alpha1.ReaderServiceAccountPrefix + "id-c); the shared reader is still revoked\n" + "The controller of a issues a new shared reader token; the members keep their own credentials.\n",
			wantDeletes: both[1:], wantSharedGone: true},
		{name: "no reader issued yet, keep the shared reader", args: []string{"c", "--keep-shared"},
			want: plugintest.Exit{Code: 2, Msg: `no reader of c on a to revoke: a has not issued c a reader yet (no ServiceAccount ` + readers + "/" + v1alpha1.ReaderServiceAccountPrefix + `id-c; see "kubectl registry status --context a"), and --keep-shared keeps the shared one: nothing was revoked`}},
		{name: "no shared reader", args: []string{"b"},
			setup: func(t *testing.T, f *fake) {
				if err := f.client.Delete(context.Background(), serviceAccount(ns, v1alpha1.ReaderName, "")); err != nil {
					t.Fatal(err)
				}
			},
			wantOut:     perPeerLine + "\n",
			wantErrOut:  "no shared reader on a to revoke (no ServiceAccount " + ns + "/" + v1alpha1.ReaderName + "): its controller creates one\n" + note,
			wantDeletes: both[:1], wantPerPeerGone: true, wantSharedGone: true},
		{name: "no such cluster", args: []string{"nosuch"},
			want: plugintest.Exit{Code: 2, Msg: `context a has no Cluster nosuch: it is not a member of the group as a sees it (its Clusters: a, b, c, x; see "kubectl registry status")`}},
		{name: "the member itself", args: []string{"a"},
			want: plugintest.Exit{Code: 2, Msg: "cluster a is the cluster of context a itself: a member issues no reader to itself. To revoke what another member issued to a, run revoke there: kubectl registry revoke a --context MEMBER"}},
		{name: "a Cluster whose status says Local", args: []string{"x"},
			want: plugintest.Exit{Code: 2, Msg: "cluster x is the cluster of context a itself: a member issues no reader to itself. To revoke what another member issued to x, run revoke there: kubectl registry revoke x --context MEMBER"}},
		{name: "readers namespace missing", args: []string{"b"},
			setup: func(t *testing.T, f *fake) {
				if err := f.client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readers}}); err != nil {
					t.Fatal(err)
				}
			},
			want: plugintest.Exit{Code: 2, Msg: "the registry is not installed on context a: the namespace " + readers + " is missing; run: kubectl registry install --context a (or pass --namespace if the registry lives in another namespace)"}},
		{name: "another namespace", args: []string{"b", "-n", "elsewhere"},
			want: plugintest.Exit{Code: 2, Msg: "the registry is not installed on context a: the namespace elsewhere is missing; run: kubectl registry install --context a (or pass --namespace if the registry lives in another namespace)"}},
		{name: "not bootstrapped", args: []string{"b"},
			setup: func(t *testing.T, f *fake) {
				if err := f.client.Delete(context.Background(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}}); err != nil {
					t.Fatal(err)
				}
			},
			want: plugintest.Exit{Code: 2, Msg: `context a has no local Cluster (none has clusterID id-a, the UID of its kube-system namespace): the controller has not bootstrapped it, so it has issued no reader. Is "kubectl registry serve" running there?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			if tt.setup != nil {
				tt.setup(t, f)
				f.deletes = nil
			}
			stdout, stderr, err := f.run(t, tt.args...)
			if diff := cmp.Diff(tt.want, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrOut, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDeletes, f.deletes); diff != "" {
				t.Errorf("delete requests (-want +got):\n%s", diff)
			}
			perPeer, shared := f.serviceAccounts(t)
			if gone := perPeer == ""; gone != tt.wantPerPeerGone {
				t.Errorf("b's reader on a: gone %t, want %t", gone, tt.wantPerPeerGone)
			}
			if gone := shared == ""; gone != tt.wantSharedGone {
				t.Errorf("the shared reader on a: gone %t, want %t", gone, tt.wantSharedGone)
			}
		})
	}
}

// TestRunFakeReplaced: a ServiceAccount replaced between revoke's read and its delete is
// not deleted (the UID precondition fails), and revoke says to run it again.
func TestRunFakeReplaced(t *testing.T) {
	f := newFake(t)
	c := f.factory.Cluster("a")
	c.Client = interceptor.NewClient(c.Client, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := cl.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if key.Name == perPeerB {
			obj.SetUID("uid-read-before-the-controller-replaced-it")
		}
		return nil
	}})
	stdout, _, err := f.run(t, "b")
	plugintest.WantExitCode(t, err, 2, "the reader of cluster b, the ServiceAccount "+readers+"/"+perPeerB+" on context a, was deleted or replaced while revoke was deleting it (its tokens are revoked if it was): run the same revoke again to be sure")
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if perPeer, shared := f.serviceAccounts(t); perPeer != uidB || shared != uidShared {
		t.Errorf("ServiceAccounts %q and %q, want both kept", perPeer, shared)
	}
}

// TestRunFakeWait: --wait waits until the controller has recreated each ServiceAccount
// and issued its Secret for the new one, and times out with exit code 2 when it does not.
func TestRunFakeWait(t *testing.T) {
	t.Run("issued", func(t *testing.T) {
		f := newFake(t, func(f *fake) { f.controller = true })
		stdout, stderr, err := f.run(t, "b", "--wait", "--timeout", "30s")
		if err != nil {
			t.Fatal(err)
		}
		want := "serviceaccount/" + perPeerB + " deleted on a (every token a issued to b is revoked)\n" +
			"serviceaccount/" + v1alpha1.ReaderName + " deleted on a (the shared reader token is revoked; the controller issues a new one)\n"
		if diff := cmp.Diff(want, stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
		wantErr := "The controller of a issues new tokens: b gets a new credential sealed to its key; the other members keep their own credentials.\n" +
			"waiting: on a, the Secret " + ns + "/" + issuedB + " still holds a token of the revoked ServiceAccount " + readers + "/" + perPeerB + "\n" +
			"waiting: on a, the Secret " + ns + "/a still holds a token of the revoked ServiceAccount " + ns + "/" + v1alpha1.ReaderName + "\n" +
			"a issued b a new credential\n" +
			"a issued a new shared reader token\n"
		if diff := cmp.Diff(wantErr, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
		if perPeer, shared := f.serviceAccounts(t); perPeer != uidB+"-new" || shared != uidShared+"-new" {
			t.Errorf("ServiceAccounts %q and %q, want both recreated", perPeer, shared)
		}
	})
	t.Run("keep the shared reader", func(t *testing.T) {
		f := newFake(t, func(f *fake) { f.controller = true })
		_, stderr, err := f.run(t, "b", "--wait", "--keep-shared")
		if err != nil {
			t.Fatal(err)
		}
		wantErr := "The controller of a issues new tokens: b gets a new credential sealed to its key; the other members keep their own credentials.\n" +
			"waiting: on a, the Secret " + ns + "/" + issuedB + " still holds a token of the revoked ServiceAccount " + readers + "/" + perPeerB + "\n" +
			"a issued b a new credential\n"
		if diff := cmp.Diff(wantErr, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
		if _, shared := f.serviceAccounts(t); shared != uidShared {
			t.Errorf("the shared reader is %q, want it kept (%q)", shared, uidShared)
		}
	})
	t.Run("departed", func(t *testing.T) {
		// b's departure is in force on a: a issues b nothing again, so --wait waits only
		// for the shared reader (and, keeping it, for nothing).
		left := func(f *fake, who string) {
			f.controller = true
			var own v1alpha1.Cluster
			if err := f.client.Get(context.Background(), client.ObjectKey{Name: "a"}, &own); err != nil {
				t.Fatal(err)
			}
			own.Annotations = map[string]string{v1alpha1.LeftClustersAnnotation: "id-" + who + "@2026-11-26T01:00:00Z"}
			if err := f.client.Update(context.Background(), &own); err != nil {
				t.Fatal(err)
			}
		}
		departedLine := "b has left the group (its departure is in force on a): a issues it no new credential\n"
		selfLine := "a has left the group (its own departure is in force on it): it issues no new credential to any peer\n"
		for _, tt := range []struct {
			name    string
			args    []string
			wantErr string
			// self records a's own departure instead of b's.
			self bool
			// revoked: a deleted b's reader already (when the departure reached it).
			revoked bool
		}{
			{name: "b's reader was revoked already, keeping the shared reader: says so and returns", args: []string{"b", "--wait", "--timeout", "50ms", "--keep-shared"}, revoked: true,
				wantErr: "b has left the group (its departure is in force on a): its reader on a was revoked already, and a issues it no new credential\n"},
			{name: "the member itself left, keeping the shared reader: nothing to wait for", args: []string{"b", "--wait", "--timeout", "50ms", "--keep-shared"}, self: true,
				wantErr: selfLine},
			{name: "the member itself left: only the shared reader", args: []string{"b", "--wait", "--timeout", "30s"}, self: true,
				wantErr: selfLine + "The controller of a issues a new shared reader token; the members keep their own credentials.\n" +
					"waiting: on a, the Secret " + ns + "/a still holds a token of the revoked ServiceAccount " + ns + "/" + v1alpha1.ReaderName + "\n" +
					"a issued a new shared reader token\n"},
			{name: "with the shared reader", args: []string{"b", "--wait", "--timeout", "30s"},
				wantErr: departedLine + "The controller of a issues a new shared reader token; the members keep their own credentials.\n" +
					"waiting: on a, the Secret " + ns + "/a still holds a token of the revoked ServiceAccount " + ns + "/" + v1alpha1.ReaderName + "\n" +
					"a issued a new shared reader token\n"},
			{name: "keeping the shared reader", args: []string{"b", "--wait", "--timeout", "50ms", "--keep-shared"},
				wantErr: departedLine},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f := newFake(t)
				who := "b"
				if tt.self {
					who = "a"
				}
				left(f, who)
				if tt.revoked {
					// Deleted by a's controller, which does not recreate it.
					f.controller = false
					sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: readers, Name: perPeerB}}
					if err := f.client.Delete(context.Background(), sa); err != nil {
						t.Fatal(err)
					}
					f.controller = true
				}
				stdout, stderr, err := f.run(t, tt.args...)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tt.revoked && stdout != "":
					t.Errorf("stdout reports a deletion of what was revoked already:\n%s", stdout)
				case !tt.revoked && !strings.HasPrefix(stdout, "serviceaccount/"+perPeerB+" deleted on a (every token a issued to b is revoked)\n"):
					t.Errorf("stdout does not report b's reader deleted:\n%s", stdout)
				}
				if diff := cmp.Diff(tt.wantErr, stderr); diff != "" {
					t.Errorf("stderr (-want +got):\n%s", diff)
				}
			})
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFake(t)
		stdout, stderr, err := f.run(t, "b", "--wait", "--timeout", "50ms")
		want := plugintest.Exit{Code: 2, Msg: "timed out after 50ms waiting for the controller of a: " +
			"on a, the ServiceAccount " + readers + "/" + perPeerB + " is not recreated yet; " +
			"on a, the ServiceAccount " + ns + "/" + v1alpha1.ReaderName + " is not recreated yet. " +
			`The old tokens are revoked; the controller issues the new ones when it runs: see "kubectl registry status --context a" and the controller's logs`}
		if diff := cmp.Diff(want, plugintest.ExitOf(err)); diff != "" {
			t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
		}
		if stdout == "" {
			t.Error("stdout is empty: the deletions are not reported")
		}
		t.Logf("stderr:\n%s", stderr)
	})
}
