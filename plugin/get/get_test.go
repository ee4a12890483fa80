package get

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/plugintest"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// bed has the clusters a, b and c, with the registry CRDs and no controllers: each gets
// its local Cluster CR (named like its context) from setup.
var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.Main(m, testbed.Options{
		Names:               []string{"a", "b", "c"},
		CRDDirectoryPaths:   []string{"../../manifests/crds"},
		NoControllerManager: true,
	}, &bed))
}

var (
	setupOnce sync.Once
	setupErr  error
)

// setup creates, once, the local Cluster CRs and the objects the tests search.
func setup(t *testing.T) {
	t.Helper()
	testbed.SkipIfNoAssets(t)
	setupOnce.Do(func() { setupErr = createFixtures() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

func createFixtures() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range bed.Clusters {
		cl, err := c.Client()
		if err != nil {
			return err
		}
		if err := createLocalCluster(ctx, c, cl); err != nil {
			return err
		}
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-" + c.Name, Namespace: "default", Labels: map[string]string{"app": "x"}},
				Data: map[string]string{"k": "v"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "team", Labels: map[string]string{"app": "x"}}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default", Labels: map[string]string{"app": "y"}}},
			deployment("web"),
		}
		if c.Name == "b" {
			objs = append(objs, daemonSet("agent"))
		}
		for _, o := range objs {
			if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

func createLocalCluster(ctx context.Context, c *testbed.Cluster, cl client.Client) error {
	uid, err := c.KubeSystemUID(ctx)
	if err != nil {
		return err
	}
	cr := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: c.Name}, Spec: v1alpha1.ClusterSpec{ClusterID: uid}}
	if err := cl.Create(ctx, cr); err != nil {
		return err
	}
	cr.Status.Type = v1alpha1.ClusterTypeLocal
	return cl.Status().Update(ctx, cr)
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/app:1"}}},
	}
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

func daemonSet(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name),
		},
	}
}

// runGet runs "kubectl registry get" through cobra under a root with the kubeconfig
// flags, like the plugin's, against the bed's kubeconfig.
func runGet(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	kubeconfig := "/nonexistent"
	if bed != nil {
		kubeconfig = bed.KubeconfigPath
	}
	cmd := plugintest.Command{New: []plugintest.NewCmd{NewCmdGet}, Timeout: time.Minute}
	return cmd.Exit(t, append([]string{"get", "--kubeconfig", kubeconfig}, args...)...)
}

var ageRegexp = regexp.MustCompile(`(?m)\b\d+(ms|s|m|h|d|y)(\d+(s|m|h|d))?$`)

// normalise replaces the AGE column (the last one of these tables) with a fixed token.
func normalise(s string) string {
	return ageRegexp.ReplaceAllString(s, "<age>")
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	plugintest.Golden(t, filepath.Join("testdata", name), got, *update)
}

func expectOK(t *testing.T, stderr string, code int) {
	t.Helper()
	if code != 0 {
		t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
	}
}

func TestGetConfigMapsAllNamespaces(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "configmaps", "-A", "-l", "app=x")
	expectOK(t, stderr, code)
	if stderr != "" {
		t.Errorf("stderr = %q, want empty", stderr)
	}
	golden(t, "configmaps-all-namespaces.txt", normalise(out))
}

func TestGetClustersFilter(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "cm", "-A", "-l", "app=x", "--clusters", "a,b", "--no-headers")
	expectOK(t, stderr, code)
	got := map[string]int{}
	for line := range strings.Lines(out) {
		got[strings.Fields(line)[0]]++
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 2}, got); diff != "" {
		t.Errorf("rows per cluster (-want +got):\n%s", diff)
	}
}

// TestGetContext checks that --context narrows the search to that context instead of
// being ignored.
func TestGetContext(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "cm", "-A", "-l", "app=x", "--context", "b", "--no-headers")
	expectOK(t, stderr, code)
	got := map[string]int{}
	for line := range strings.Lines(out) {
		got[strings.Fields(line)[0]]++
	}
	if diff := cmp.Diff(map[string]int{"b": 2}, got); diff != "" {
		t.Errorf("rows per cluster (-want +got):\n%s", diff)
	}
}

func TestGetSortByLimit(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "configmaps", "-A", "-l", "app=x", "--sort-by", ".metadata.name", "--limit", "2")
	expectOK(t, stderr, code)
	golden(t, "configmaps-sort-limit.txt", normalise(out))
}

func TestGetJSON(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "configmaps", "-n", "default", "-l", "app=x", "-o", "json")
	expectOK(t, stderr, code)
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o json is not JSON: %v", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("got %s %s, want v1 List", list.APIVersion, list.Kind)
	}
	var got []string
	for _, item := range list.Items {
		got = append(got, item.Kind+" "+item.Metadata.Annotations[ClusterAnnotation]+"/"+item.Metadata.Name)
	}
	want := []string{"ConfigMap a/web-a", "ConfigMap b/web-b", "ConfigMap c/web-c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
}

func TestGetWorkloads(t *testing.T) {
	setup(t)
	out, stderr, code := runGet(t, "workloads", "-n", "default")
	expectOK(t, stderr, code)
	golden(t, "workloads.txt", normalise(out))
}

func TestGetFallbackWithoutClusterCR(t *testing.T) {
	setup(t)
	c := bed.Cluster("c")
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Delete(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := createLocalCluster(ctx, c, cl); err != nil {
			t.Error(err)
		}
	})
	out, stderr, code := runGet(t, "configmaps", "-n", "default", "-l", "app=x", "--no-headers")
	expectOK(t, stderr, code)
	if !strings.Contains(stderr, "warning: context c: no local registry Cluster") {
		t.Errorf("stderr lacks the fallback warning:\n%s", stderr)
	}
	if !strings.Contains(out, "c    web-c") && !regexp.MustCompile(`(?m)^c\s+web-c\s`).MatchString(out) {
		t.Errorf("no row of cluster c under its context name:\n%s", out)
	}
}

func TestGetCutCluster(t *testing.T) {
	setup(t)
	c := bed.Cluster("c")
	if err := c.Cut(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Heal(); err != nil {
			t.Error(err)
		}
	})
	out, stderr, code := runGet(t, "configmaps", "-A", "-l", "app=x", "--cluster-timeout", "5s")
	if code != cmdutil.ExitCodeError {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitCodeError)
	}
	if !strings.Contains(stderr, "error: cluster c: ") {
		t.Errorf("stderr lacks the failure of cluster c:\n%s", stderr)
	}
	if strings.Count(out, "\n") != 5 || strings.Contains(out, "web-c") {
		t.Errorf("want the header and the 4 rows of a and b:\n%s", out)
	}
}

func TestGetUnknownResource(t *testing.T) {
	setup(t)
	_, stderr, code := runGet(t, "nosuchthings")
	if code != cmdutil.ExitCodeError {
		t.Errorf("exit code %d, want %d", code, cmdutil.ExitCodeError)
	}
	if !strings.Contains(stderr, `the server doesn't have a resource type "nosuchthings"`) {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestGetUsageErrors(t *testing.T) {
	setup(t)
	for name, args := range map[string][]string{
		"no resource":       {},
		"unknown flag":      {"cm", "--nope"},
		"negative limit":    {"cm", "--limit", "-1"},
		"bad output":        {"cm", "-o", "fancy"},
		"bad sort-by":       {"cm", "--sort-by", ".metadata.name["},
		"unknown context":   {"cm", "--contexts", "zz"},
		"name and selector": {"cm", "x", "-l", "app=x"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := runGet(t, args...)
			if code != cmdutil.ExitCodeError {
				t.Errorf("exit code %d, want %d", code, cmdutil.ExitCodeError)
			}
			if !strings.Contains(stderr, "See 'kubectl registry get --help' for usage.") {
				t.Errorf("stderr lacks the usage hint:\n%s", stderr)
			}
		})
	}
}

func TestRelaxedJSONPath(t *testing.T) {
	for in, want := range map[string]string{
		".metadata.name":   "{.metadata.name}",
		"metadata.name":    "{.metadata.name}",
		"{.metadata.name}": "{.metadata.name}",
	} {
		got, err := relaxedJSONPath(in)
		if err != nil || got != want {
			t.Errorf("relaxedJSONPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestGetWatch runs "get -w" and changes objects on two clusters: each change is
// printed again, and cancelling ends the watch cleanly.
func TestGetWatch(t *testing.T) {
	setup(t)
	run := plugintest.Command{New: []plugintest.NewCmd{NewCmdGet}}.Start(t,
		"get", "--kubeconfig", bed.KubeconfigPath, "cm", "-n", "default", "-l", "app=watched", "--contexts", "a,b", "--no-headers", "-w")
	out, errOut := run.Out, run.ErrOut

	// rows returns the rows (CLUSTER NAME DATA) of the last frame printed.
	lastFrame := func() []string {
		frames := strings.Split(out.String(), "\n\n")
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(frames[len(frames)-1]), "\n") {
			if f := strings.Fields(l); len(f) >= 3 {
				rows = append(rows, strings.Join(f[:3], " "))
			}
		}
		return rows
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cmp.Equal(want, lastFrame()) {
			if time.Now().After(deadline) {
				t.Fatalf("the watch did not print %q; stdout:\n%s\nstderr:\n%s", want, out.String(), errOut.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	clientOf := func(name string) client.Client {
		cl, err := bed.Cluster(name).Client()
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	a, b := clientOf("a"), clientOf("b")
	bg := context.Background()
	// Wait for the first (empty) frame: the watches start after it.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(errOut.String(), "No resources found"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no first frame; stderr %q", errOut.String())
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: "default", Labels: map[string]string{"app": "watched"}}}
	if err := b.Create(bg, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitFor("b watched 0")
	if err := a.Create(bg, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	waitFor("a watched 0", "b watched 0")
	cm.Data = map[string]string{"k": "v"}
	if err := b.Update(bg, cm); err != nil {
		// The object read back has a resourceVersion: update that one.
		var cur corev1.ConfigMap
		if err := b.Get(bg, client.ObjectKeyFromObject(cm), &cur); err != nil {
			t.Fatal(err)
		}
		cur.Data = cm.Data
		if err := b.Update(bg, &cur); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("a watched 0", "b watched 1")
	for _, cl := range []client.Client{a, b} {
		if err := cl.Delete(bg, &corev1.ConfigMap{ObjectMeta: cm.ObjectMeta}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor()

	if err := run.Stop(t, 5*time.Second); err != nil {
		t.Errorf("the watch ended with %v, want nil", err)
	}
}
