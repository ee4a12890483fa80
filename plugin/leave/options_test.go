package leave

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/kubefake"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// now is the clock of the fake runs: the departure time recorded.
var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeCluster is the Cluster CR of name (clusterID id-<name>), Ready or not.
func fakeCluster(name string, ready bool) *v1alpha1.Cluster {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{
			ClusterID: types.UID("id-" + name),
			AuthInfo:  v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: name, Namespace: v1alpha1.DefaultNamespace}},
		},
		Status: v1alpha1.ClusterStatus{Conditions: []v1alpha1.ClusterCondition{
			{Type: v1alpha1.ClusterConditionReady, Status: status, Reason: "Test", Message: "as the test set it"},
		}},
	}
}

// fakeMember returns a Factory whose context a is a member of the group a, b, c: its
// own Cluster a, b Ready and c not.
func fakeMember() *kubefake.Factory {
	ks := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "id-a"}}
	f := kubefake.New(nil)
	c := f.Add("a", ks, fakeCluster("a", true), fakeCluster("b", true), fakeCluster("c", false))
	c.Kubernetes = k8sfake.NewClientset(ks.DeepCopy())
	f.Current = "a"
	return f
}

// runFake runs "kubectl registry leave <args>" through cobra and cmdutil.RunE, as the
// plugin does, against f.
func runFake(t *testing.T, f *kubefake.Factory, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(f, streams)
	o.Now = func() time.Time { return now }
	err = plugintest.RunVerb(t, newCmdLeave(o), args...)
	return out.String(), errOut.String(), err
}

// departures returns the confirmed-departures annotation of a's own Cluster: what leave
// records.
func departures(t *testing.T, f *kubefake.Factory) string {
	t.Helper()
	var c v1alpha1.Cluster
	if err := f.Cluster("a").Client.Get(context.Background(), client.ObjectKey{Name: "a"}, &c); err != nil {
		t.Fatal(err)
	}
	return c.Annotations[v1alpha1.ConfirmedDeparturesAnnotation]
}

const leaveHint = "\nSee 'kubectl registry leave --help' for usage."

// TestCompleteValidate checks every usage error of leave's Complete and Validate (and of
// its flags and arguments) without API servers: each exits with code 2 and the hint to
// --help, and nothing is recorded.
func TestCompleteValidate(t *testing.T) {
	const label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	const subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	tests := []struct {
		name string
		args []string
		want plugintest.Exit
	}{
		// Arguments and flags.
		{name: "two clusters", args: []string{"b", "c"},
			want: plugintest.Exit{Code: 2, Msg: "accepts at most 1 arg(s), received 2" + leaveHint}},
		{name: "contexts", args: []string{"b", "--contexts", "a,b"},
			want: plugintest.Exit{Code: 2, Msg: "unknown flag: --contexts" + leaveHint}},
		{name: "bad duration", args: []string{"b", "--timeout", "soon"},
			want: plugintest.Exit{Code: 2, Msg: `invalid argument "soon" for "--timeout" flag: time: invalid duration "soon"` + leaveHint}},
		// Complete.
		{name: "unknown context", args: []string{"b", "--context", "nosuch"},
			want: plugintest.Exit{Code: 2, Msg: `--context "nosuch": no such context in the kubeconfig` + leaveHint}},
		{name: "unknown dry run", args: []string{"b", "--dry-run=all"},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server", got "all"` + leaveHint}},
		{name: "empty dry run", args: []string{"b", "--dry-run="},
			want: plugintest.Exit{Code: 2, Msg: `--dry-run must be "none", "client" or "server": a value must be set, as in --dry-run=server` + leaveHint}},
		{name: "bare dry run", args: []string{"b", "--dry-run"},
			want: plugintest.Exit{Code: 2, Msg: "flag needs an argument: --dry-run" + leaveHint}},
		{name: "unknown output", args: []string{"b", "-o", "table"},
			want: plugintest.Exit{Code: 2, Msg: `unable to match a printer suitable for the output format "table", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml` + leaveHint}},
		// Validate.
		{name: "bad cluster name", args: []string{"Not_A_Cluster"},
			want: plugintest.Exit{Code: 2, Msg: `cluster name "Not_A_Cluster": ` + subdomain + leaveHint}},
		{name: "bad namespace", args: []string{"b", "-n", "Not_A_Namespace"},
			want: plugintest.Exit{Code: 2, Msg: `--namespace "Not_A_Namespace": ` + label + leaveHint}},
		{name: "wait in a client dry run", args: []string{"b", "--dry-run=client", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is written to wait for" + leaveHint}},
		{name: "wait in a server dry run", args: []string{"b", "--dry-run=server", "--wait"},
			want: plugintest.Exit{Code: 2, Msg: "--wait cannot be used with --dry-run: nothing is written to wait for" + leaveHint}},
		{name: "confirm without a cluster", args: []string{"--confirm"},
			want: plugintest.Exit{Code: 2, Msg: "--confirm needs the CLUSTER whose departure it confirms (a cluster leaving by itself needs no confirmation)" + leaveHint}},
		{name: "no timeout", args: []string{"b", "--wait", "--timeout", "0s"},
			want: plugintest.Exit{Code: 2, Msg: "--timeout must be positive, got 0s" + leaveHint}},
		{name: "every Validate error at once", args: []string{"Not_A_Cluster", "-n", "Not_A_Namespace", "--wait", "--timeout", "-1s"},
			want: plugintest.Exit{Code: 2, Msg: `cluster name "Not_A_Cluster": ` + subdomain + "\n" +
				`--namespace "Not_A_Namespace": ` + label + "\n" +
				"--timeout must be positive, got -1s" + leaveHint}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeMember()
			stdout, _, err := runFake(t, f, tt.args...)
			if diff := cmp.Diff(tt.want, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if got := departures(t, f); got != "" {
				t.Errorf("departures recorded: %q", got)
			}
		})
	}
}

// TestRunFake runs leave against a fake member: what it prints, what it records (nothing
// in a dry run), and its refusals.
func TestRunFake(t *testing.T) {
	recorded := "id-b@" + now.Format(time.RFC3339)
	pending := func(x, other string) string {
		return "1 of the 3 members record it (a, as the Clusters on a show); it takes effect when 1 more record it, or when " + x + " records it itself.\n" +
			"To confirm it on another member (" + other + "), run there: kubectl registry leave " + x + " --confirm --context <context of that member>\n"
	}
	others := pending("b", "c")
	tests := []struct {
		name       string
		args       []string
		want       plugintest.Exit
		wantOut    string
		wantErrOut string
		// wantLeft is the confirmed-departures annotation of a afterwards.
		wantLeft string
		// confirmedOnC records on c's Cluster (a's copy of it) that b left.
		confirmedOnC bool
	}{
		{name: "client dry run", args: []string{"b", "--dry-run=client"},
			wantOut:    clusterResource + "/b: departure recorded on " + clusterResource + "/a on context a, not in force yet (dry run)\n",
			wantErrOut: others},
		{name: "server dry run", args: []string{"b", "--dry-run=server"},
			wantOut:    clusterResource + "/b: departure recorded on " + clusterResource + "/a on context a, not in force yet (server dry run)\n",
			wantErrOut: others},
		{name: "leave: one member's record is not enough", args: []string{"b"},
			wantOut:    clusterResource + "/b: departure recorded on " + clusterResource + "/a on context a, not in force yet\n",
			wantErrOut: others, wantLeft: recorded},
		{name: "confirm: with c's record, a majority", args: []string{"b", "--confirm"}, confirmedOnC: true,
			wantOut:    clusterResource + "/b left the group (recorded on " + clusterResource + "/a on context a)\n",
			wantErrOut: "A majority of the members record it (a, c): the members drop b, and b drops its copies of theirs when its controller reads them. Synced objects are kept.\n",
			wantLeft:   recorded},
		{name: "confirm: no other record seen yet", args: []string{"b", "--confirm"},
			wantOut:    clusterResource + "/b: departure recorded on " + clusterResource + "/a on context a, not in force yet\n",
			wantErrOut: "warning: no other member's record of the departure of cluster b is on context a yet (the copies of the members' Clusters carry their records once synced): recording it anyway\n" + others,
			wantLeft:   recorded},
		{name: "the member itself", args: []string{"--context", "a"},
			wantOut:    clusterResource + "/a left the group (recorded on " + clusterResource + "/a on context a)\n",
			wantErrOut: "The other members drop a once their controllers read a's Cluster; a drops its copies of theirs. Synced objects are kept.\n",
			wantLeft:   "id-a@" + now.Format(time.RFC3339)},
		{name: "not Ready", args: []string{"c"},
			want: plugintest.Exit{Code: 2, Msg: "cluster c is not Ready in the view of context a (Ready=False, Test: as the test set it), so it cannot be told to forget the group now. Re-run with --force to record its departure anyway: it takes effect once a majority of the members record it (kubectl registry leave c --confirm with the context of each other member), and it forgets the group when its controller next reads them"}},
		{name: "not Ready, forced", args: []string{"c", "--force"},
			wantOut:    clusterResource + "/c: departure recorded on " + clusterResource + "/a on context a, not in force yet\n",
			wantErrOut: pending("c", "b"),
			wantLeft:   "id-c@" + now.Format(time.RFC3339)},
		{name: "no such cluster", args: []string{"nosuch"},
			want: plugintest.Exit{Code: 2, Msg: `context a has no Cluster nosuch: it is not a member of the group as a sees it (its Clusters: a, b, c; see "kubectl registry status")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeMember()
			if tt.confirmedOnC {
				var c v1alpha1.Cluster
				cl := f.Cluster("a").Client
				if err := cl.Get(context.Background(), client.ObjectKey{Name: "c"}, &c); err != nil {
					t.Fatal(err)
				}
				c.Annotations = map[string]string{v1alpha1.ConfirmedDeparturesAnnotation: "id-b@" + now.Add(-time.Minute).Format(time.RFC3339)}
				if err := cl.Update(context.Background(), &c); err != nil {
					t.Fatal(err)
				}
			}
			stdout, stderr, err := runFake(t, f, tt.args...)
			if diff := cmp.Diff(tt.want, plugintest.ExitOf(err)); diff != "" {
				t.Errorf("plugintest.Exit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrOut, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if got := departures(t, f); got != tt.wantLeft {
				t.Errorf("left-clusters of a = %q, want %q", got, tt.wantLeft)
			}
		})
	}

	t.Run("yaml", func(t *testing.T) {
		f := fakeMember()
		stdout, _, err := runFake(t, f, "b", "--dry-run=client", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"kind: Cluster\n", "  name: a\n", v1alpha1.ConfirmedDeparturesAnnotation + ": " + recorded + "\n"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if got := departures(t, f); got != "" {
			t.Errorf("a client dry run recorded %q", got)
		}
	})

	t.Run("in force as a's controller decided", func(t *testing.T) {
		f := fakeMember()
		var c v1alpha1.Cluster
		cl := f.Cluster("a").Client
		if err := cl.Get(context.Background(), client.ObjectKey{Name: "a"}, &c); err != nil {
			t.Fatal(err)
		}
		c.Annotations = map[string]string{v1alpha1.LeftClustersAnnotation: recorded}
		if err := cl.Update(context.Background(), &c); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runFake(t, f, "b")
		if err != nil {
			t.Fatal(err)
		}
		if stdout != "" {
			t.Errorf("stdout %q", stdout)
		}
		want := "cluster b (clusterID id-b) already left the group at " + now.Format(time.RFC3339) + " (recorded on " + clusterResource + "/a)\n"
		if diff := cmp.Diff(want, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
	})

	t.Run("already recorded", func(t *testing.T) {
		f := fakeMember()
		if _, _, err := runFake(t, f, "b"); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runFake(t, f, "b")
		if err != nil {
			t.Fatal(err)
		}
		if stdout != "" {
			t.Errorf("stdout %q", stdout)
		}
		want := "the departure of cluster b (clusterID id-b) is already recorded on " + clusterResource + "/a, at " + now.Format(time.RFC3339) + "\n" + others
		if diff := cmp.Diff(want, stderr); diff != "" {
			t.Errorf("stderr (-want +got):\n%s", diff)
		}
	})
}
