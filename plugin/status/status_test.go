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
		{[]string{"-o", "wide"}, []string{`--output must be one of (json, yaml), got "wide"`, "See 'kubectl registry status --help' for usage."}},
		{[]string{"--bogus"}, []string{"unknown flag: --bogus"}},
		{[]string{"extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"--context", "a", "--contexts", "a,b"}, []string{"--context and --contexts cannot be used together"}},
		{[]string{"--contexts", "a,a"}, []string{`context "a" named twice`}},
		{[]string{"--contexts", "a,nosuch"}, []string{`no context "nosuch" in the kubeconfig`}},
		{[]string{"--context", "nosuch"}, []string{`--context "nosuch": no such context`}},
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
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a"},
			Spec:       v1alpha1.ClusterSpec{ClusterID: "id-a"},
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
	got := newView("ctx", clusters, rules)
	want := View{
		Context: "ctx",
		Clusters: []ClusterInfo{
			{Name: "a", ID: "id-a", Type: "Peer", State: "Failed", Ready: "False", Synced: "True", LastHeartbeatTime: &hb, Version: "v1.36.3", Provider: "kind", Message: "down"},
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
	if err := printView(&b, got, hb.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	wantOut := `NAME   ID     TYPE     STATE    READY     SYNCED    VERSION   PROVIDER   LAST HEARTBEAT   MESSAGE
a      id-a   Peer     Failed   False     True      v1.36.3   kind       90s              down
z      id-z   <none>   <none>   Unknown   Unknown   <none>    <none>     <unknown>        <none>

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
