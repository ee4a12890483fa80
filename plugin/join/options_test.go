package join

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// fakeKubeconfig is the --kubeconfig of the fake Factories of side A.
const fakeKubeconfig = "/fake/kubeconfig"

// fakeMember adds to f the cluster of context name as the registry's controller leaves
// it: kube-system (UID id-<name>), the registry namespace, the local Cluster and its
// reader Secret, whose kubeconfig points at the fake server of the context.
func fakeMember(t *testing.T, f *kubefake.Factory, name string) {
	t.Helper()
	addFakeCluster(t, f, name, readerToken(name), interceptor.Funcs{})
}

// addFakeCluster adds to f the cluster of context name as a controller leaves it (see
// fakeMember), with token in its reader kubeconfig, funcs intercepting its client, and
// objs besides.
func addFakeCluster(t *testing.T, f *kubefake.Factory, name, token string, funcs interceptor.Funcs, objs ...client.Object) *kubefake.Cluster {
	t.Helper()
	ks := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID("id-" + name)}}
	cluster := localCluster(name, "id-"+name, kubefake.Host(name))
	cluster.UID, cluster.ResourceVersion, cluster.ManagedFields = "", "", nil
	secret := readerSecret(t, name, kubefake.Host(name))
	secret.UID, secret.ResourceVersion = "", ""
	secret.Data[v1alpha1.KubeconfigKey] = kubeconfigWithToken(t, name, kubefake.Host(name), token)
	objs = append([]client.Object{ks, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DefaultNamespace}}, cluster, secret}, objs...)
	c := f.AddWithFuncs(name, funcs, objs...)
	c.Kubernetes = k8sfake.NewClientset(ks.DeepCopy())
	return c
}

// fakeGroup returns a Factory with a registry member per name, the first one current.
func fakeGroup(t *testing.T, names ...string) *kubefake.Factory {
	t.Helper()
	f := kubefake.New(nil)
	for _, n := range names {
		fakeMember(t, f, n)
	}
	f.Current = names[0]
	f.Explicit = fakeKubeconfig
	return f
}

// runFake runs "kubectl registry join <args>" through cobra and cmdutil.RunE, as the
// plugin does, with f as side A's Factory. Side B's is f for side A's kubeconfig, and
// peers[path] for --peer-kubeconfig path (an empty kubeconfig when it is not there).
func runFake(t *testing.T, f *kubefake.Factory, peers map[string]*kubefake.Factory, args ...string) (o *Options, stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o = NewOptions(f, streams)
	o.PeerFactory = func(path string) kube.Factory {
		if path == f.Explicit {
			return f
		}
		if p, ok := peers[path]; ok {
			return p
		}
		return kubefake.New(nil)
	}
	o.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	err = plugintest.RunVerb(t, newCmdJoin(o), args...)
	return o, out.String(), errOut.String(), err
}

const joinHint = "\nSee 'kubectl registry join --help' for usage."

// TestCompleteValidate checks every usage error of join's Complete and Validate (and of
// its flags and arguments) without API servers: each exits with code 2 and the hint to
// --help. None reaches Run: the fake clusters are left as they were.
func TestCompleteValidate(t *testing.T) {
	west := kubefake.New([]string{"west", "x"})
	noCurrent := kubefake.New([]string{"y"})
	noCurrent.Current = ""
	peers := map[string]*kubefake.Factory{"/fake/west": west, "/fake/no-current": noCurrent}

	tests := []struct {
		name string
		args []string
		want plugintest.Exit
	}{
		// Complete.
		{name: "unknown context", args: []string{"--context", "nosuch", "--peer-context", "b"},
			want: plugintest.Exit{Code: 2, Msg: `--context "nosuch": no such context in the kubeconfig` + joinHint}},
		{name: "unknown peer context", args: []string{"--peer-context", "nosuch"},
			want: plugintest.Exit{Code: 2, Msg: `--peer-context "nosuch": no such context in the kubeconfig (/fake/kubeconfig)` + joinHint}},
		{name: "peer context of the other kubeconfig", args: []string{"--peer-kubeconfig", "/fake/west", "--peer-context", "b"},
			want: plugintest.Exit{Code: 2, Msg: `--peer-context "b": no such context in the kubeconfig (/fake/west)` + joinHint}},
		{name: "peer kubeconfig without a current context", args: []string{"--peer-kubeconfig", "/fake/no-current"},
			want: plugintest.Exit{Code: 2, Msg: `--peer-context is required: the kubeconfig (/fake/no-current) has no current context` + joinHint}},
		{name: "http server", args: []string{"--peer-context", "b", "--server", "http://a.example.com"},
			want: plugintest.Exit{Code: 2, Msg: `--server: API server address "http://a.example.com": scheme must be https, not "http"` + joinHint}},
		{name: "peer server with credentials", args: []string{"--peer-context", "b", "--peer-server", "https://u:p@b.example.com"},
			want: plugintest.Exit{Code: 2, Msg: `--peer-server: API server address "https://u:xxxxx@b.example.com": must not contain user info` + joinHint}},
		{name: "unknown dry run", args: []string{"--peer-context", "b", "--dry-run=all"},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server", got "all"` + joinHint}},
		{name: "dry run true", args: []string{"--peer-context", "b", "--dry-run=true"},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server", got "true"` + joinHint}},
		{name: "empty dry run", args: []string{"--peer-context", "b", "--dry-run="},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server": a value must be set, as in --dry-run=server` + joinHint}},
		{name: "bare dry run", args: []string{"--peer-context", "b", "--dry-run"},
			want: plugintest.Exit{Code: 2, Msg: `flag needs an argument: --dry-run` + joinHint}},
		{name: "unknown output", args: []string{"--peer-context", "b", "-o", "table"},
			want: plugintest.Exit{Code: 2, Msg: `unable to match a printer suitable for the output format "table", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml` + joinHint}},
		// Validate.
		{name: "no peer", args: []string{"--context", "a"},
			want: plugintest.Exit{Code: 2, Msg: "--peer-context is required: it names the cluster to join with (side B)" + joinHint}},
		{name: "empty peer context", args: []string{"--peer-context="},
			want: plugintest.Exit{Code: 2, Msg: "--peer-context is required: it names the cluster to join with (side B)" + joinHint}},
		{name: "bad namespace", args: []string{"--peer-context", "b", "-n", "Not_A_Namespace"},
			want: plugintest.Exit{Code: 2, Msg: `--namespace "Not_A_Namespace": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')` + joinHint}},
		{name: "peer server with one way", args: []string{"--peer-context", "b", "--one-way", "--peer-server", "b.example.com"},
			want: plugintest.Exit{Code: 2, Msg: "--peer-server has no effect with --one-way: side B's address is not copied to A" + joinHint}},
		{name: "wait in a client dry run", args: []string{"--peer-context", "b", "--dry-run=client", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is written to wait for" + joinHint}},
		{name: "wait in a server dry run", args: []string{"--peer-context", "b", "--dry-run=server", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is written to wait for" + joinHint}},
		{name: "no timeout", args: []string{"--peer-context", "b", "--wait", "--timeout", "0s"},
			want: plugintest.Exit{Code: 2, Msg: "--timeout must be positive, got 0s" + joinHint}},
		{name: "negative timeout", args: []string{"--peer-context", "b", "--wait", "--timeout", "-1m"},
			want: plugintest.Exit{Code: 2, Msg: "--timeout must be positive, got -1m0s" + joinHint}},
		{name: "legacy without a timeout", args: []string{"--peer-context", "b", "--legacy", "--timeout", "0s"},
			want: plugintest.Exit{Code: 2, Msg: "--timeout must be positive, got 0s" + joinHint}},
		{name: "legacy one way", args: []string{"--peer-context", "b", "--legacy", "--one-way"},
			want: plugintest.Exit{Code: 2, Msg: "--legacy cannot be used with --one-way: the consent is written on A's copy of B's Cluster, which --one-way does not write" + joinHint}},
		// Flags and arguments.
		{name: "argument", args: []string{"--peer-context", "b", "c"},
			want: plugintest.Exit{Code: 2, Msg: `unexpected argument "c": "kubectl registry join" takes no arguments` + joinHint}},
		{name: "contexts", args: []string{"--contexts", "a,b"},
			want: plugintest.Exit{Code: 2, Msg: "unknown flag: --contexts" + joinHint}},
		{name: "bad duration", args: []string{"--peer-context", "b", "--timeout", "soon"},
			want: plugintest.Exit{Code: 2, Msg: `invalid argument "soon" for "--timeout" flag: time: invalid duration "soon"` + joinHint}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeGroup(t, "a", "b")
			_, stdout, _, err := runFake(t, f, peers, tt.args...)
			if diff := cmp.Diff(tt.want, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			var c v1alpha1.Cluster
			if err := f.Cluster("b").Client.Get(context.Background(), client.ObjectKey{Name: "a"}, &c); !apierrors.IsNotFound(err) {
				t.Errorf("Cluster a on b: %v, want not found", err)
			}
		})
	}
}

// TestComplete checks what Complete derives from valid flags on fake clusters: the
// parsed --dry-run and the two sides.
func TestComplete(t *testing.T) {
	west := kubefake.New(nil)
	fakeMember(t, west, "west")
	fakeMember(t, west, "a")
	west.Current = "west"
	peers := map[string]*kubefake.Factory{"/fake/west": west}
	type sideView struct{ Name, Flags, Host, ServerFlag, Advertise string }
	view := func(s *side) sideView {
		return sideView{s.name, s.flags, s.host, s.serverFlag, s.advertise}
	}
	tests := []struct {
		name   string
		args   []string
		dryRun cmdutil.DryRunStrategy
		a, b   sideView
	}{
		{name: "current context", args: []string{"--peer-context", "b", "--dry-run=client"}, dryRun: cmdutil.DryRunClient,
			a: sideView{"a", "--context a --kubeconfig /fake/kubeconfig", "https://a.example:6443", "--server", ""},
			b: sideView{"b", "--context b --kubeconfig /fake/kubeconfig", "https://b.example:6443", "--peer-server", ""}},
		{name: "servers", args: []string{"--context", "b", "--peer-context", "a", "--server", "b.example.com", "--peer-server", "10.0.0.1:6443", "--dry-run=server"}, dryRun: cmdutil.DryRunServer,
			a: sideView{"b", "--context b --kubeconfig /fake/kubeconfig", "https://b.example:6443", "--server", "https://b.example.com"},
			b: sideView{"a", "--context a --kubeconfig /fake/kubeconfig", "https://a.example:6443", "--peer-server", "https://10.0.0.1:6443"}},
		{name: "peer kubeconfig, its current context", args: []string{"--peer-kubeconfig", "/fake/west", "--dry-run=none"}, dryRun: cmdutil.DryRunNone,
			a: sideView{"a", "--context a --kubeconfig /fake/kubeconfig", "https://a.example:6443", "--server", ""},
			b: sideView{"west", "--context west --kubeconfig /fake/west", "https://west.example:6443", "--peer-server", ""}},
		{name: "same context name in the peer kubeconfig", args: []string{"--peer-kubeconfig", "/fake/west", "--peer-context", "a", "--dry-run=client"}, dryRun: cmdutil.DryRunClient,
			a: sideView{"a", "--context a --kubeconfig /fake/kubeconfig", "https://a.example:6443", "--server", ""},
			b: sideView{"a (/fake/west)", "--context a --kubeconfig /fake/west", "https://a.example:6443", "--peer-server", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeGroup(t, "a", "b")
			o := NewOptions(f, genericiooptions.NewTestIOStreamsDiscard())
			o.PeerFactory = func(path string) kube.Factory {
				if p, ok := peers[path]; ok {
					return p
				}
				return f
			}
			cmd := &cobra.Command{Use: "join"}
			cmd.Flags().String("context", "", "")
			o.AddFlags(cmd)
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			if err := o.Complete(cmd, nil); err != nil {
				t.Fatal(err)
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			if o.DryRun != tt.dryRun {
				t.Errorf("DryRun = %v, want %v", o.DryRun, tt.dryRun)
			}
			if diff := cmp.Diff(tt.a, view(o.a)); diff != "" {
				t.Errorf("side A (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.b, view(o.b)); diff != "" {
				t.Errorf("side B (-want +got):\n%s", diff)
			}
			if got := f.Cluster(o.a.name).Options; got.Verb != "join" || got.Timeout != requestTimeout {
				t.Errorf("client options of side A: %+v", got)
			}
		})
	}
}

// TestRunFake runs join on two fake clusters: the dry runs print what would be written
// and write nothing; a join writes each side's Cluster and Secret on the other, and
// joining again changes nothing.
func TestRunFake(t *testing.T) {
	lines := func(outcome, suffix string) string {
		return "secret/a " + outcome + " on b" + suffix + "\n" +
			clusterResource + "/a " + outcome + " on b" + suffix + "\n" +
			"secret/b " + outcome + " on a" + suffix + "\n" +
			clusterResource + "/b " + outcome + " on a" + suffix + "\n"
	}
	// copied reports which of the copies each side holds.
	copied := func(t *testing.T, f *kubefake.Factory) []string {
		t.Helper()
		var got []string
		for _, x := range []struct{ on, from string }{{"b", "a"}, {"a", "b"}} {
			cl := f.Cluster(x.on).Client
			var c v1alpha1.Cluster
			if err := cl.Get(context.Background(), client.ObjectKey{Name: x.from}, &c); err == nil {
				got = append(got, "cluster/"+x.from+" on "+x.on)
			}
			var s corev1.Secret
			if err := cl.Get(context.Background(), client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: x.from}, &s); err == nil {
				got = append(got, "secret/"+x.from+" on "+x.on)
			}
		}
		return got
	}

	for _, tt := range []struct {
		name       string
		args       []string
		wantOut    string
		wantCopied []string
	}{
		{name: "client dry run", args: []string{"--dry-run=client"}, wantOut: lines("created", " (dry run)")},
		{name: "server dry run", args: []string{"--dry-run=server"}, wantOut: lines("created", " (server dry run)")},
		{name: "join", wantOut: lines("created", ""),
			wantCopied: []string{"cluster/a on b", "secret/a on b", "cluster/b on a", "secret/b on a"}},
		{name: "one way", args: []string{"--one-way"},
			wantOut:    "secret/a created on b\n" + clusterResource + "/a created on b\n",
			wantCopied: []string{"cluster/a on b", "secret/a on b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeGroup(t, "a", "b")
			_, stdout, stderr, err := runFake(t, f, nil, append([]string{"--peer-context", "b"}, tt.args...)...)
			if err != nil {
				t.Fatalf("join: %v\nstderr: %s", err, stderr)
			}
			if diff := cmp.Diff(tt.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			if diff := cmp.Diff(tt.wantCopied, copied(t, f)); diff != "" {
				t.Errorf("copies (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("join again", func(t *testing.T) {
		f := fakeGroup(t, "a", "b")
		if _, _, _, err := runFake(t, f, nil, "--peer-context", "b"); err != nil {
			t.Fatal(err)
		}
		_, stdout, _, err := runFake(t, f, nil, "--peer-context", "b")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(lines("unchanged", ""), stdout); diff != "" {
			t.Errorf("stdout (-want +got):\n%s", diff)
		}
	})

	t.Run("yaml masks the secrets", func(t *testing.T) {
		f := fakeGroup(t, "a", "b")
		_, stdout, _, err := runFake(t, f, nil, "--peer-context", "b", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# on context b\napiVersion: v1\n", "---\n# on context a\napiVersion: v1\n", "kubeconfig: Kioq\n", "kind: Cluster\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if strings.Contains(stdout, "token-a") || strings.Contains(stdout, "dG9rZW4t") {
			t.Errorf("stdout shows a reader token:\n%s", stdout)
		}
		if diff := cmp.Diff([]string(nil), copied(t, f)); diff != "" {
			t.Errorf("copies (-want +got):\n%s", diff)
		}
	})

	t.Run("same context twice", func(t *testing.T) {
		f := fakeGroup(t, "a", "b")
		_, stdout, _, err := runFake(t, f, nil, "--context", "a", "--peer-context", "a")
		want := plugintest.Exit{Code: 2, Msg: "context a and context a are the same cluster (kube-system UID id-a): join needs two different clusters"}
		if diff := cmp.Diff(want, plugintest.ExitOf(err)); diff != "" {
			t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
		}
		if stdout != "" {
			t.Errorf("stdout %q", stdout)
		}
	})

	t.Run("unreachable peer", func(t *testing.T) {
		f := fakeGroup(t, "a", "b")
		f.Cluster("b").Kubernetes.(*k8sfake.Clientset).PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("dial tcp: connection refused")
		})
		_, _, _, err := runFake(t, f, nil, "--peer-context", "b")
		want := plugintest.Exit{Code: 2, Msg: "cannot reach the API server of context b at https://b.example:6443: dial tcp: connection refused"}
		if diff := cmp.Diff(want, plugintest.ExitOf(err)); diff != "" {
			t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
		}
	})
}
