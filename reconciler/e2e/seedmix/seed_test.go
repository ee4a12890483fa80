package seedmix

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// The seed: a checkout of cisco-open/cluster-registry-controller (SEED_SRC) for its
// chart's CRDs and RBAC, and its controller built from it (SEED_CONTROLLER, else
// bin/seed/manager of this repository, else bin/manager of the checkout).
const (
	envSeedSrc        = "SEED_SRC"
	envSeedController = "SEED_CONTROLLER"
	// seedChart is the chart's directory in the checkout.
	seedChart = "deploy/charts/cluster-registry"
	// The chart installed as its README does: release cluster-registry in namespace
	// cluster-registry, so its objects are named cluster-registry-controller[-...].
	seedRelease   = "cluster-registry"
	seedNamespace = "cluster-registry"
	seedFullname  = "cluster-registry-controller"
)

// seed is where the seed's source and controller binary are.
type seed struct {
	src, bin string
}

// findSeed returns the seed's checkout and binary, or skips the test saying how to get
// them (CI's clean clone has neither).
func findSeed(t *testing.T) seed {
	t.Helper()
	testbed.SkipIfNoAssets(t)
	const how = "fetch github.com/cisco-open/cluster-registry-controller, then `make test-seedmix SEED_SRC=<its checkout>` (builds it with `make seed-controller`)"
	src := os.Getenv(envSeedSrc)
	if src == "" {
		t.Skipf("the seed's source is absent (%s unset): %s", envSeedSrc, how)
	}
	if _, err := os.Stat(filepath.Join(src, seedChart, "Chart.yaml")); err != nil {
		t.Skipf("%s=%s is not a checkout of the seed (%v): %s", envSeedSrc, src, err, how)
	}
	candidates := []string{os.Getenv(envSeedController), "../../../bin/seed/manager", filepath.Join(src, "bin", "manager")}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			abs, err := filepath.Abs(c)
			if err != nil {
				t.Fatal(err)
			}
			return seed{src: src, bin: abs}
		}
	}
	t.Skipf("the seed's controller is not built (looked for %s): %s", strings.Join(candidates, ", "), how)
	return seed{}
}

// render renders the chart's templates named, with its default values, as `helm
// template cluster-registry <chart> --namespace cluster-registry` does, with the few
// functions the chart uses.
func (s seed) render(values map[string]any, names ...string) ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(s.src, seedChart)
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the seed's chart: %w", err)
	}
	var chart map[string]any
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil {
		return nil, fmt.Errorf("decoding the seed's Chart.yaml: %w", err)
	}
	valuesYAML, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the seed's values: %w", err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(valuesYAML, &vals); err != nil {
		return nil, fmt.Errorf("decoding the seed's values.yaml: %w", err)
	}
	for k, v := range values {
		vals[k] = v
	}
	data := map[string]any{
		"Values":  vals,
		"Release": map[string]any{"Name": seedRelease, "Namespace": seedNamespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
	}
	tpl := template.New("chart")
	tpl.Funcs(template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := tpl.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"default": func(d, v any) any {
			if v == nil || v == "" || v == false {
				return d
			}
			return v
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
	})
	helpers, err := os.ReadFile(filepath.Join(dir, "templates", "_helpers.tpl"))
	if err != nil {
		return nil, fmt.Errorf("reading the seed's chart helpers: %w", err)
	}
	if _, err := tpl.Parse(string(helpers)); err != nil {
		return nil, fmt.Errorf("parsing the seed's chart helpers: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join(dir, "templates", name))
		if err != nil {
			return nil, fmt.Errorf("reading the seed's chart template %s: %w", name, err)
		}
		t, err := tpl.New(name).Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("parsing the seed's chart template %s: %w", name, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("rendering the seed's chart template %s: %w", name, err)
		}
		objs, err := decodeAll(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("the seed's chart template %s: %w", name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decodeAll decodes a multi-document YAML stream, skipping empty documents.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if len(o) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: o})
	}
}

// install installs the seed on cluster c as its chart does: its CRDs (replacing those
// the bed installed), the namespace, the controller's and the reader's RBAC.
func (s seed) install(t *testing.T, c *testbed.Cluster) client.Client {
	t.Helper()
	ctx := context.Background()
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(s.src, seedChart, "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("the seed's chart has no CRDs (%v)", err)
	}
	replaceCRDs(t, cl, crds)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seedNamespace}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	objs, err := s.render(nil, "rbac.yaml", "reader-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing the seed's %s %s on %s: %v", o.GetKind(), o.GetName(), c.Name, err)
		}
	}
	return cl
}

// serve runs the seed's controller for cluster c as a process, with the environment
// its chart's Deployment sets (but the webhook, which needs the API server to call it,
// and leader election), authenticated as the chart's ServiceAccount. It returns a func
// that stops it (called again at cleanup, it does nothing).
func (s seed) serve(t *testing.T, c *testbed.Cluster) (stop func()) {
	t.Helper()
	ctx := context.Background()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(seedNamespace).CreateToken(ctx, seedFullname,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of the seed's controller ServiceAccount: %v", err)
	}
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.DirectConfig().Host, CertificateAuthorityData: c.CAData()}
	kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	kc.CurrentContext = c.Name
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfigPath); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "seed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "--cluster-validator-webhook-enabled=false")
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfigPath,
		"METRICS_ADDR=0", "HEALTH_ADDR=0",
		"LEADER_ELECTION_ENABLED=false",
		"LOG_FORMAT=json", "LOG_VERBOSITY=0",
		"PROVISION_LOCAL_CLUSTER="+c.Name,
		"NAMESPACE="+seedNamespace,
		"READER_SERVICE_ACCOUNT_NAME="+seedFullname+"-reader",
		"NETWORK_NAME=default",
		"MANAGE_LOCAL_CLUSTER_SECRET=true",
		// Peers reach it through the bed's proxy, as ours advertise.
		"APISERVER_ENDPOINT_ADDRESS="+c.Host(),
		"CORE_RESOURCES_SOURCE_ENABLED=true",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the seed's controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("log of the seed's controller of %s:\n%s", c.Name, strings.Join(lines, "\n"))
		}
	})
	return stop
}

// uninstall deletes what `helm uninstall` of the seed's chart deletes of what install
// applied (the CRDs stay, as Helm keeps a chart's crds/).
func (s seed) uninstall(t *testing.T, cl client.Client) {
	t.Helper()
	objs, err := s.render(nil, "rbac.yaml", "reader-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := cl.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting the seed's %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// replaceCRDs replaces the registry's CRDs on a cluster with those in the files given,
// as an install or a chart's crds/ does.
func replaceCRDs(t *testing.T, cl client.Client, paths []string) {
	t.Helper()
	ctx := context.Background()
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var want apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		// The API server's CRD controllers write the status (Established, NamesAccepted)
		// of a CRD just created or changed: an update retries on conflict.
		have := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: want.Name}}
		err = harness.Update(ctx, cl, have, func() { have.Spec = want.Spec })
		if apierrors.IsNotFound(err) {
			err = cl.Create(ctx, &want)
		}
		if err != nil {
			t.Fatalf("installing the CRD %s: %v", want.Name, err)
		}
	}
}

// seedMembers checks what the seed's controller shows on its cluster: exactly the named
// Clusters, self Local, the others Peer, all Ready, the peers ClustersSynced (the seed
// sets no Ready condition).
func seedMembers(cl client.Client, self string, names ...string) error {
	var list unstructured.UnstructuredList
	list.SetAPIVersion("clusterregistry.k8s.cisco.com/v1alpha1")
	list.SetKind("ClusterList")
	if err := cl.List(context.Background(), &list); err != nil {
		return err
	}
	var got []string
	for _, c := range list.Items {
		got = append(got, c.GetName())
	}
	sort.Strings(got)
	want := append([]string(nil), names...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("the seed's %s knows clusters %v, want %v", self, got, want)
	}
	for _, c := range list.Items {
		typ, _, _ := unstructured.NestedString(c.Object, "status", "type")
		state, _, _ := unstructured.NestedString(c.Object, "status", "state")
		msg, _, _ := unstructured.NestedString(c.Object, "status", "message")
		wantType := "Peer"
		if c.GetName() == self {
			wantType = "Local"
		}
		if typ != wantType || state != "Ready" {
			return fmt.Errorf("on the seed's %s, Cluster %s is %s %q: %s", self, c.GetName(), typ, state, msg)
		}
		if wantType == "Local" {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		synced := false
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == "ClustersSynced" && m["status"] == "True" {
				synced = true
			}
		}
		if !synced {
			return fmt.Errorf("on the seed's %s, Cluster %s is not ClustersSynced: %v", self, c.GetName(), conds)
		}
	}
	return nil
}
