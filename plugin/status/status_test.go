package status

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has the clusters a, b and c, which form a group, and d, whose CRDs the test
// deletes (the "registry not installed" case).
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{
		Names:             []string{"a", "b", "c", "d"},
		CRDDirectoryPaths: []string{"../../manifests/crds"},
	}, &bed))
}

// runStatus runs "kubectl registry status" through cobra under a root that has the
// kubeconfig flags, like the plugin's.
func runStatus(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := plugintest.Command{New: []plugintest.NewCmd{NewCmdStatus}, Timeout: time.Minute}
	return cmd.Run(t, append([]string{"status", "--kubeconfig", kubeconfig}, args...)...)
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name), got, *update)
}

var (
	columns   = regexp.MustCompile(`\S+( \S+)*`)
	uidRe     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ageRe     = regexp.MustCompile(`^([0-9]+[smhdy])+$`)
	versionRe = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+\S*$`)
)

// normalise replaces what changes from run to run (cluster IDs, ages, versions) with
// fixed tokens, cell by cell (cells are separated by at least two spaces in the tables),
// and realigns the columns as the command does.
func normalise(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := columns.FindAllString(l, -1)
		for j, c := range cells {
			switch {
			case uidRe.MatchString(c):
				cells[j] = "<ID>"
			case ageRe.MatchString(c):
				cells[j] = "<AGE>"
			case versionRe.MatchString(c):
				cells[j] = "<VERSION>"
			}
		}
		lines[i] = strings.Join(cells, "\t")
	}
	var b strings.Builder
	w := printers.GetNewTabWriter(&b)
	fmt.Fprint(w, strings.Join(lines, "\n"))
	if err := w.Flush(); err != nil {
		panic(err)
	}
	return b.String()
}

// ruleSettled reports whether the rule on cl is Ready with every selected source syncing.
func ruleSettled(cl client.Client, name string) error {
	var r v1alpha1.ResourceSyncRule
	if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, &r); err != nil {
		return err
	}
	info := ruleInfo(r)
	if info.Ready != "True" || info.SourcesSelected == 0 || info.SourcesSyncing != info.SourcesSelected {
		return fmt.Errorf("rule %s not settled: %+v", name, info)
	}
	return nil
}

// TestStatus forms a group of three on real API servers with a controller each and
// reads it. The subtests build on each other.
func TestStatus(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	kc := bed.KubeconfigPath
	clients := harness.FormGroup(t, bed, "a", "b", "c")
	a := clients["a"]

	rule := &v1alpha1.ResourceSyncRule{
		// A kind the peers' readers may list, so that every source syncs.
		ObjectMeta: metav1.ObjectMeta{Name: "features"},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			GVK:   v1alpha1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "ClusterFeature"},
			Rules: []v1alpha1.SyncRule{{}},
		},
	}
	if err := a.Create(context.Background(), rule); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, "the rule settles on a", func() error { return ruleSettled(a, "features") })

	t.Run("table", func(t *testing.T) {
		out, _, err := runStatus(t, kc, "--context", "a")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "status-a.golden", normalise(out))
	})

	t.Run("json", func(t *testing.T) {
		out, _, err := runStatus(t, kc, "--context", "a", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var v View
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("parsing the output: %v", err)
		}
		var names []string
		for _, c := range v.Clusters {
			names = append(names, c.Name)
			if c.State != "Ready" || c.Ready != "True" || c.Synced != "True" || c.ID == "" || c.LastHeartbeatTime == nil {
				t.Errorf("cluster %s: %+v", c.Name, c)
			}
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, names); diff != "" {
			t.Errorf("clusters (-want +got):\n%s", diff)
		}
		if v.Context != "a" || len(v.Rules) != 1 || v.Rules[0].Name != "features" || v.Rules[0].Kind != "ClusterFeature" {
			t.Errorf("view: %+v", v)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		out, _, err := runStatus(t, kc, "--context", "a", "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "clusters:\n") || !strings.Contains(out, "\nrules:\n") {
			t.Errorf("yaml output:\n%s", out)
		}
	})

	t.Run("contexts", func(t *testing.T) {
		out, stderr, err := runStatus(t, kc, "--contexts", "a,b,c")
		if err != nil {
			t.Fatal(err)
		}
		if stderr != "" {
			t.Errorf("stderr: %s", stderr)
		}
		golden(t, "contexts-a-b-c.golden", out)
	})

	t.Run("watch shows a peer going not Ready and back", func(t *testing.T) {
		testWatchCutAndHeal(t, kc, bed.Cluster("b"))
	})

	t.Run("events", func(t *testing.T) {
		// The cut of b above made a's controller report b Failed: a warning event of the
		// Cluster b on a.
		harness.Eventually(t, 30*time.Second, "status --events shows b's warning", func() error {
			out, stderr, err := runStatus(t, kc, "--context", "a", "--events")
			if err != nil || stderr != "" {
				return fmt.Errorf("error %v, stderr %q", err, stderr)
			}
			_, events, ok := strings.Cut(out, "\nWarning events, newest first:\n")
			if !ok {
				return fmt.Errorf("no events table:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(events), "\n")
			if f := strings.Fields(lines[0]); len(f) < 5 || f[2] != "OBJECT" {
				return fmt.Errorf("header %q", lines[0])
			}
			for _, l := range lines[1:] {
				if f := strings.Fields(l); len(f) >= 4 && f[1] == "Cluster/b" && f[2] == "StateFailed" {
					return nil
				}
			}
			return fmt.Errorf("no StateFailed event of Cluster/b:\n%s", events)
		})

		out, _, err := runStatus(t, kc, "--context", "a", "--events", "--max-events", "1", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var v View
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Events) != 1 || v.Events[0].Kind == "" || v.Events[0].LastSeen == nil {
			t.Errorf("--max-events 1 -o json: events %+v, want one, with its kind and time", v.Events)
		}

		out, _, err = runStatus(t, kc, "--contexts", "a,b", "--events")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Warning events on context a, newest first:\n", "on context b"} {
			if !strings.Contains(out, want) {
				t.Errorf("--contexts a,b --events: no %q in\n%s", want, out)
			}
		}
	})

	t.Run("a context cut off", func(t *testing.T) {
		if err := bed.Cluster("c").Cut(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := bed.Cluster("c").Heal(); err != nil {
				t.Error(err)
			}
		})
		harness.Eventually(t, 90*time.Second, "a sees c not Ready", func() error {
			state, msg, err := harness.PeerState(a, "c")
			if err != nil {
				return err
			}
			if state == v1alpha1.ClusterStateReady {
				return fmt.Errorf("c is %s: %s", state, msg)
			}
			return nil
		})
		out, stderr, err := runStatus(t, kc, "--contexts", "a,b,c")
		plugintest.WantExitCode(t, err, 2, "could not read 1 of 3 contexts: c")
		if want := "cannot reach the API server of context c at " + bed.Cluster("c").Host(); !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not contain %q", stderr, want)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 {
			t.Fatalf("want a header and 3 rows, got:\n%s", out)
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) != 5 || f[3] != "?" {
				t.Errorf("row %q: want ? in the column of c", l)
			}
			if f[0] == "c" && f[1] == "Ready" {
				t.Errorf("row %q: a still sees c Ready", l)
			}
		}

		// Alone, the cut context is an error naming the server.
		_, _, err = runStatus(t, kc, "--context", "c")
		plugintest.WantExitCode(t, err, 2, "cannot reach the API server of context c at "+bed.Cluster("c").Host())
	})

	t.Run("registry not installed", func(t *testing.T) {
		d, err := bed.Cluster("d").Client()
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"clusters", "resourcesyncrules"} {
			crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: kind + "." + v1alpha1.GroupVersion.Group}}
			if err := d.Delete(context.Background(), crd); err != nil {
				t.Fatal(err)
			}
		}
		harness.Eventually(t, 60*time.Second, "the CRDs of d are gone", func() error {
			_, _, err := runStatus(t, kc, "--context", "d")
			if err == nil || !strings.Contains(err.Error(), "not installed") {
				return fmt.Errorf("status --context d: %v", err)
			}
			return nil
		})
		_, _, err = runStatus(t, kc, "--context", "d")
		plugintest.WantExitCode(t, err, 2, "the registry is not installed on context d", "run: kubectl registry install --context d --kubeconfig "+kc)
	})
}

// healthBound is how long the watch may take to show a peer that stopped (or resumed)
// answering: the health check's own bound (harness.Serve checks peers every 300ms and
// fails them after 3 failed checks), plus the status write, the watch event and the
// redraw, with room for a loaded machine (about 1.2s here).
const healthBound = 3*300*time.Millisecond + 10*time.Second

// testWatchCutAndHeal runs "status --context a --watch", cuts peer off from the others
// and heals it, and checks that the watch printed peer not Ready, then Ready again, each
// within healthBound, and that cancelling ends the watch cleanly.
func testWatchCutAndHeal(t *testing.T, kc string, peer *testbed.Cluster) {
	run := plugintest.Command{New: []plugintest.NewCmd{NewCmdStatus}}.Start(t, "status", "--kubeconfig", kc, "--context", "a", "--watch")
	out, errOut := run.Out, run.ErrOut

	// peerRows returns the READY cell of every row of peer printed so far, in order.
	peerRows := func() []string {
		var cells []string
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[0] == peer.Name && uidRe.MatchString(f[1]) {
				cells = append(cells, f[4])
			}
		}
		return cells
	}
	waitFor := func(what string, bound time.Duration, ok func([]string) bool) {
		t.Helper()
		start := time.Now()
		for !ok(peerRows()) {
			if time.Since(start) > bound {
				t.Fatalf("the watch did not show %s within %s; stdout:\n%s\nstderr:\n%s", what, bound, out.String(), errOut.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the watch showed %s after %s", what, time.Since(start).Round(100*time.Millisecond))
	}
	last := func(want string) func([]string) bool {
		return func(cells []string) bool { return len(cells) > 0 && cells[len(cells)-1] == want }
	}
	waitFor(peer.Name+" Ready", 10*time.Second, last("True"))
	frames := len(peerRows())

	if err := peer.Cut(); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = peer.Heal()
		}
	})
	waitFor(peer.Name+" not Ready after the cut", healthBound, last("False"))
	if err := peer.Heal(); err != nil {
		t.Fatal(err)
	}
	healed = true
	waitFor(peer.Name+" Ready again after the heal", healthBound, last("True"))
	if n := len(peerRows()); n < frames+2 {
		t.Errorf("%d views printed after the first, want at least 2 (not Ready, Ready)", n-frames)
	}

	if err := run.Stop(t, 5*time.Second); err != nil {
		t.Errorf("the watch ended with %v, want nil", err)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut.String())
	}
}

// writeKubeconfig writes a kubeconfig with one context per name (servers that are never
// contacted) and returns its path.
func writeKubeconfig(t *testing.T, names ...string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, n := range names {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://" + n + ".invalid:6443"}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	cfg.CurrentContext = names[0]
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadFlags needs no cluster: every misuse exits with 2 before contacting one.
func TestBadFlags(t *testing.T) {
	kc := writeKubeconfig(t, "a", "b")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-o", "name"}, []string{`--output must be one of (json, yaml, wide), got "name"`, "See 'kubectl registry status --help' for usage."}},
		{[]string{"--bogus"}, []string{"unknown flag: --bogus"}},
		{[]string{"extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"--context", "a", "--contexts", "a,b"}, []string{"--context and --contexts cannot be used together"}},
		{[]string{"--contexts", "a,a"}, []string{`context "a" named twice`}},
		{[]string{"--contexts", "a,nosuch"}, []string{`no context "nosuch" in the kubeconfig`}},
		{[]string{"--context", "nosuch"}, []string{`--context "nosuch": no such context`}},
		{[]string{"--events", "--max-events", "0"}, []string{"--max-events must be positive, got 0"}},
		{[]string{"--max-events", "x"}, []string{`invalid argument "x" for "--max-events"`}},
		{[]string{"-w=maybe"}, []string{`invalid argument "maybe" for "-w, --watch"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runStatus(t, kc, tc.args...)
			plugintest.WantExitCode(t, err, 2, tc.want...)
		})
	}
}

func TestNewView(t *testing.T) {
	hb := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	clusters := []v1alpha1.Cluster{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "z"},
			Spec:       v1alpha1.ClusterSpec{ClusterID: "id-z"},
		},
		// s runs the seed's controller: this cluster's admin named it a legacy peer.
		{
			ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{v1alpha1.LegacyPeerAnnotation: "true"}},
			Spec:       v1alpha1.ClusterSpec{ClusterID: "id-s"},
			Status:     v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Type: v1alpha1.ClusterTypePeer},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Spec: v1alpha1.ClusterSpec{ClusterID: "id-a", KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{
				{ClientNetwork: "west", ServerAddress: "https://west.example"}, {ServerAddress: "a.example:6443"},
			}},
			Status: v1alpha1.ClusterStatus{
				State: v1alpha1.ClusterStateFailed, Type: v1alpha1.ClusterTypePeer, Message: "down",
				ClusterMetadata: v1alpha1.ClusterMetadata{Version: "v1.36.3", Provider: "kind"},
				Conditions: []v1alpha1.ClusterCondition{
					{Type: v1alpha1.ClusterConditionReady, Status: corev1.ConditionFalse, LastHeartbeatTime: hb},
					{Type: v1alpha1.ClusterConditionClustersSynced, Status: corev1.ConditionTrue},
				},
			},
		},
	}
	cond := func(typ string, status metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Message: msg}
	}
	rules := []v1alpha1.ResourceSyncRule{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "r2"},
			Spec:       v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},
			Status: v1alpha1.ResourceSyncRuleStatus{
				Conditions: []metav1.Condition{cond("Ready", "True", ""), cond("Conflict", "True", "2 in the way"), cond("Degraded", "True", "x failing")},
				Sources: []v1alpha1.RuleSource{
					{Cluster: "a", State: v1alpha1.SourceSyncing}, {Cluster: "b", State: v1alpha1.SourceUnreachable},
					{Cluster: "c", State: v1alpha1.SourceNotSelected}, {Cluster: "d", State: v1alpha1.SourceSyncing},
				},
				SyncedObjects: 5, Conflicts: 2,
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "r1"},
			Spec:       v1alpha1.ResourceSyncRuleSpec{GVK: v1alpha1.GroupVersionKind{Version: "v1", Kind: "Secret"}},
			Status: v1alpha1.ResourceSyncRuleStatus{
				Conditions: []metav1.Condition{cond("Ready", "False", "unknown kind"), cond("Degraded", "True", "x failing")},
			},
		},
	}
	// a is reached at the address join --server chose, not the one it advertises.
	got := newView("ctx", clusters, rules, map[string]string{"a": "https://10.0.0.1:6443"})
	want := View{
		Context: "ctx",
		Clusters: []ClusterInfo{
			{Name: "a", ID: "id-a", Type: "Peer", State: "Failed", Ready: "False", Synced: "True", LastHeartbeatTime: &hb, Version: "v1.36.3", Provider: "kind", Message: "down",
				Advertised: "https://a.example:6443", ReachedAt: "https://10.0.0.1:6443"},
			{Name: "s", ID: "id-s", Type: "Peer", Legacy: true, State: "Ready", Ready: "Unknown", Synced: "Unknown"},
			{Name: "z", ID: "id-z", Ready: "Unknown", Synced: "Unknown"},
		},
		Rules: []RuleInfo{
			{Name: "r1", Version: "v1", Kind: "Secret", Ready: "False", Message: "unknown kind"},
			{Name: "r2", Group: "apps", Version: "v1", Kind: "Deployment", Ready: "True", SourcesSyncing: 2, SourcesSelected: 3,
				Sources: rules[0].Status.Sources, SyncedObjects: 5, Conflicts: 2, Message: "2 in the way"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("view (-want +got):\n%s", diff)
	}

	var b strings.Builder
	if err := printView(&b, got, hb.Add(90*time.Second), false); err != nil {
		t.Fatal(err)
	}
	wantOut := `NAME   ID     TYPE            STATE    READY     SYNCED    VERSION   PROVIDER   LAST HEARTBEAT   MESSAGE
a      id-a   Peer            Failed   False     True      v1.36.3   kind       90s              down; reached at https://10.0.0.1:6443 (advertises https://a.example:6443)
s      id-s   Peer (legacy)   Ready    Unknown   Unknown   <none>    <none>     <unknown>        <none>
z      id-z   <none>          <none>   Unknown   Unknown   <none>    <none>     <unknown>        <none>

NAME   KIND                 READY   SOURCES       SYNCED   CONFLICTS   MESSAGE
r1     Secret.v1            False   0/0 syncing   0        0           unknown kind
r2     Deployment.v1.apps   True    2/3 syncing   5        2           2 in the way
`
	if diff := cmp.Diff(wantOut, b.String()); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

func TestCompare(t *testing.T) {
	view := func(states ...string) View {
		var v View
		for i := 0; i < len(states); i += 2 {
			v.Clusters = append(v.Clusters, ClusterInfo{Name: states[i], State: states[i+1]})
		}
		return v
	}
	rows := compare(
		[]View{view("a", "Ready", "b", "Ready", "c", "Failed"), view("a", "Ready", "b", "Ready", "c", "Ready"), view("a", "Ready", "b", "Ready"), {}},
		[]bool{false, false, false, true},
	)
	var b strings.Builder
	if err := printCompare(&b, []string{"a", "b", "c", "d"}, rows); err != nil {
		t.Fatal(err)
	}
	want := `NAME   A        B       C       D     DISAGREE
a      Ready    Ready   Ready   ?     no
b      Ready    Ready   Ready   ?     no
c      Failed   Ready   -       ?     yes
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTruncate(t *testing.T) {
	for in, want := range map[string]string{
		"short":                 "short",
		"two\nlines":            "two lines",
		strings.Repeat("x", 61): strings.Repeat("x", 57) + "...",
		strings.Repeat("x", 60): strings.Repeat("x", 60),
	} {
		if got := truncate(in, maxMessage); got != want {
			t.Errorf("truncate(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRegistryEvents(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC)) }
	ev := func(kind, apiVersion, name, typ, reason string, last metav1.Time) corev1.Event {
		return corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name + "." + reason},
			InvolvedObject: corev1.ObjectReference{Kind: kind, APIVersion: apiVersion, Name: name},
			Type:           typ, Reason: reason, Message: reason + " of " + name, LastTimestamp: last,
			Source: corev1.EventSource{Component: "kubectl-registry"},
		}
	}
	const gv = "clusterregistry.k8s.cisco.com/v1alpha1"
	series := ev("ResourceSyncRule", gv, "r", "Warning", "ChangedAfterWrite", metav1.Time{})
	series.EventTime = metav1.NewMicroTime(at(1).Time)
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(at(9).Time)}
	series.ReportingController, series.Source = "registry", corev1.EventSource{}
	events := []corev1.Event{
		ev("Cluster", gv, "b", "Warning", "StateFailed", at(5)),
		ev("Cluster", gv, "b", "Normal", "StateReady", at(8)),               // not a warning
		ev("Pod", "v1", "p", "Warning", "BackOff", at(7)),                   // not the registry's
		ev("Cluster", "other.example.com/v1", "x", "Warning", "Bad", at(7)), // another group
		ev("ClusterFeature", gv, "gpu", "Warning", "Invalid", at(2)),
		ev("Cluster", gv, "c", "Warning", "StateFailed", at(6)),
		series,
	}
	t0 := func(m metav1.Time) *metav1.Time { return &m }
	want := []EventInfo{
		{Kind: "ResourceSyncRule", Name: "r", Reason: "ChangedAfterWrite", Count: 7, LastSeen: t0(at(9)), Source: "registry", Message: "ChangedAfterWrite of r"},
		{Kind: "Cluster", Name: "c", Reason: "StateFailed", Count: 1, LastSeen: t0(at(6)), Source: "kubectl-registry", Message: "StateFailed of c"},
		{Kind: "Cluster", Name: "b", Reason: "StateFailed", Count: 1, LastSeen: t0(at(5)), Source: "kubectl-registry", Message: "StateFailed of b"},
	}
	got := registryEvents(events, 3)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); diff != "" {
		t.Errorf("registryEvents (-want +got):\n%s", diff)
	}
	if got := registryEvents(nil, 5); got == nil || len(got) != 0 {
		t.Errorf("no events: %#v, want an empty list", got)
	}

	var b strings.Builder
	if err := printEvents(&b, "on context a", want[1:], at(10).Time); err != nil {
		t.Fatal(err)
	}
	wantTable := "Warning events on context a, newest first:\n" +
		"LAST SEEN   OBJECT      REASON        COUNT   MESSAGE\n" +
		"4m          Cluster/c   StateFailed   1       StateFailed of c\n" +
		"5m          Cluster/b   StateFailed   1       StateFailed of b\n"
	if diff := cmp.Diff(wantTable, b.String()); diff != "" {
		t.Errorf("printEvents (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := printEvents(&b, "", nil, at(10).Time); err != nil || b.String() != "No warning events.\n" {
		t.Errorf("printEvents of none: %q, %v", b.String(), err)
	}
}
