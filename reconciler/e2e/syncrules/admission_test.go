package syncrules

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const (
	admissionNS = "sync-admission"
	// stampLabel is what the test's mutating webhook sets, to a new value on every write.
	stampLabel = "e2e.kubectl-registry.io/stamp"
	// fightLabel spares an object the webhook's mutation (the fighting-controller case);
	// its writes are still counted.
	fightLabel = "e2e.kubectl-registry.io/fight"
)

// mutator is a mutating admission webhook served by the test process: on every write of
// a synced ConfigMap copy it sets stampLabel to a new value, a change our copy never has.
// It counts the writes the controllers make (requests with our field manager), per
// cluster and object.
type mutator struct {
	caPEM []byte
	url   string

	mu     sync.Mutex
	stamp  int
	writes map[string]int // cluster/name -> controller writes seen
}

func startMutator(t *testing.T) *mutator {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "e2e-mutator"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	m := &mutator{
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		writes: map[string]int{},
	}
	pair, err := tls.X509KeyPair(m.caPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	m.url = "https://" + ln.Addr().String() + "/mutate/"
	srv := &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m
}

func (m *mutator) serve(w http.ResponseWriter, r *http.Request) {
	cluster := strings.TrimPrefix(r.URL.Path, "/mutate/")
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	_ = json.Unmarshal(req.Options.Raw, &opts)
	m.mu.Lock()
	m.stamp++
	stamp := m.stamp
	if opts.FieldManager == v1alpha1.FieldManager && (req.DryRun == nil || !*req.DryRun) {
		m.writes[cluster+"/"+req.Name]++
	}
	m.mu.Unlock()
	var obj metav1.PartialObjectMetadata
	_ = json.Unmarshal(req.Object.Raw, &obj)
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if _, spared := obj.Labels[fightLabel]; !spared {
		// Copies always carry labels (the ownership marks), so the label map exists.
		patch, _ := json.Marshal([]map[string]any{{
			"op": "add", "path": "/metadata/labels/" + strings.ReplaceAll(stampLabel, "/", "~1"), "value": strconv.Itoa(stamp),
		}})
		pt := admissionv1.PatchTypeJSONPatch
		review.Response.Patch, review.Response.PatchType = patch, &pt
	}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// counts returns a copy of the controller writes seen so far.
func (m *mutator) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.writes))
	for k, v := range m.writes {
		out[k] = v
	}
	return out
}

// register installs the webhook on a cluster: ConfigMap copies (objects with the
// ownership label) in admissionNS only, so it cannot affect any other test.
func (m *mutator) register(t *testing.T, cluster string, cl client.Client) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	url := m.url + cluster
	timeout := int32(10)
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-sync-admission"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "stamp.e2e.kubectl-registry.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: m.caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{admissionNS}},
			}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: v1alpha1.OwnershipLabel, Operator: metav1.LabelSelectorOpExists},
			}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}, Scope: ptrTo(admissionregistrationv1.NamespacedScope)},
			}},
		}},
	}
	if err := cl.Create(context.Background(), cfg); err != nil {
		t.Fatalf("registering the webhook on %s: %v", cluster, err)
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), cfg) })
	// The API server picks the configuration up asynchronously: probe with a dry run.
	harness.Eventually(t, 30*time.Second, "the webhook is active on "+cluster, func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: admissionNS, Name: "webhook-probe",
			Labels: map[string]string{v1alpha1.OwnershipLabel: "probe"}}}
		if err := cl.Create(context.Background(), probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Labels[stampLabel] == "" {
			return fmt.Errorf("not mutated yet")
		}
		return nil
	})
}

func ptrTo[T any](v T) *T { return &v }

// degradedMessages returns the message of the Degraded condition of every rule on cl whose
// name starts with prefix and whose Degraded condition is True with reason.
func degradedMessages(cl client.Client, prefix, reason string) (string, error) {
	var list v1alpha1.ResourceSyncRuleList
	if err := cl.List(context.Background(), &list); err != nil {
		return "", err
	}
	var msgs []string
	for _, r := range list.Items {
		if !strings.HasPrefix(r.Name, prefix) {
			continue
		}
		for _, c := range r.Status.Conditions {
			if c.Type == v1alpha1.RuleConditionDegraded && c.Status == metav1.ConditionTrue && c.Reason == reason {
				msgs = append(msgs, r.Name+": "+c.Message)
			}
		}
	}
	return strings.Join(msgs, "\n"), nil
}

// TestAdmissionLoop checks that the controllers settle, and say so, when the local
// cluster changes a copy after every write: a mutating admission webhook that stamps each
// write of a copy with a new label value (our copy never has it), and a controller of
// someone else that changes a data key of a copy whenever we restore it. Three clusters,
// originals on two of them, overlapping rules made on two different clusters.
func TestAdmissionLoop(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, metricsURL := harness.FormGroupWithMetrics(t, bed, names...)
	first, second, third := cl["first"], cl["second"], cl["third"]
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admissionNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	hook := startMutator(t)
	for _, n := range names {
		hook.register(t, n, cl[n])
	}

	// Overlapping rules, one made on first and one on third; both spread to every member.
	applyRule(t, first, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: admission-all
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [`+admissionNS+`]
`)
	applyRule(t, third, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: admission-labelled
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  createNamespaces: true
  rules:
  - match:
    - namespaces: [`+admissionNS+`]
      labels:
      - matchLabels: {app: loop}
`)
	orig := func(name string, labels, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: admissionNS, Name: name, Labels: labels}, Data: data}
	}
	// Originals in both directions: first's copies land on second and third, third's on
	// first and second.
	if err := first.Create(context.Background(), orig("from-first", map[string]string{"app": "loop"}, map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	if err := third.Create(context.Background(), orig("from-third", map[string]string{"app": "loop"}, map[string]string{"b": "2"})); err != nil {
		t.Fatal(err)
	}
	if err := first.Create(context.Background(), orig("fight-me", map[string]string{fightLabel: "yes"}, map[string]string{"c": "3"})); err != nil {
		t.Fatal(err)
	}
	stamped := map[string][]string{"first": {"from-third"}, "second": {"from-first", "from-third"}, "third": {"from-first"}}

	// Someone else's controller on second: it sets data.fought on its copy of fight-me
	// whenever the copy lacks it, i.e. right after each of our writes.
	ctx, cancel := context.WithCancel(context.Background())
	fighterDone := make(chan struct{})
	var fights atomic.Int32
	go func() {
		defer close(fighterDone)
		for ctx.Err() == nil {
			var cm corev1.ConfigMap
			if err := second.Get(ctx, client.ObjectKey{Namespace: admissionNS, Name: "fight-me"}, &cm); err == nil && cm.Data["fought"] != "yes" {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data["fought"] = "yes"
				if second.Update(ctx, &cm) == nil {
					fights.Add(1)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-fighterDone })

	harness.Eventually(t, 60*time.Second, "every copy exists, the stamped ones with the webhook's label", func() error {
		for c, objs := range stamped {
			got := listAdmissionCM(t, cl[c])
			for _, o := range objs {
				cm, ok := got[o]
				if !ok {
					return fmt.Errorf("%s has no copy of %s", c, o)
				}
				if cm.Labels[stampLabel] == "" {
					return fmt.Errorf("the copy of %s on %s was not mutated: %v", o, c, cm.Labels)
				}
			}
		}
		for _, c := range []string{"second", "third"} {
			if _, ok := listAdmissionCM(t, cl[c])["fight-me"]; !ok {
				return fmt.Errorf("%s has no copy of fight-me", c)
			}
		}
		return nil
	})

	t.Run("the rules report the copies the cluster changes after each write", func(t *testing.T) {
		harness.Eventually(t, 60*time.Second, "Degraded with reason "+v1alpha1.ReasonChangedAfterWrite+" naming every copy", func() error {
			want := map[string][]string{}
			for c, objs := range stamped {
				want[c] = append(want[c], objs...)
			}
			want["second"] = append(want["second"], "fight-me")
			for c, objs := range want {
				msg, err := degradedMessages(cl[c], "admission-", v1alpha1.ReasonChangedAfterWrite)
				if err != nil {
					return err
				}
				for _, o := range objs {
					if !strings.Contains(msg, admissionNS+"/"+o) {
						return fmt.Errorf("on %s, no rule names %s/%s as changed after write; Degraded messages: %q", c, admissionNS, o, msg)
					}
				}
			}
			// third's copy of fight-me is left alone by everyone: it is not reported.
			msg, err := degradedMessages(third, "admission-", v1alpha1.ReasonChangedAfterWrite)
			if err != nil {
				return err
			}
			if strings.Contains(msg, "fight-me") {
				return fmt.Errorf("third reports fight-me, which nothing changes there: %q", msg)
			}
			return nil
		})
		msg, _ := degradedMessages(second, "admission-", v1alpha1.ReasonChangedAfterWrite)
		t.Logf("second reports: %s", msg)
		for _, w := range []string{stampLabel, "data.fought"} {
			if !strings.Contains(msg, w) {
				t.Errorf("second's Degraded message does not say what changes (%s): %q", w, msg)
			}
		}
		for _, c := range []string{"first", "second", "third"} {
			held, err := harness.MetricSum(metricsURL[c], "kubectl_registry_sync_held_total", `rule="admission-`)
			if err != nil {
				t.Fatal(err)
			}
			if held < 1 {
				t.Errorf("%s: kubectl_registry_sync_held_total is %v, want at least 1", c, held)
			}
		}
	})

	t.Run("the controllers settle: bounded writes, then none", func(t *testing.T) {
		writes := func() map[string]float64 {
			out := map[string]float64{}
			for _, c := range names {
				v, err := harness.MetricSum(metricsURL[c], "kubectl_registry_sync_writes_total", `rule="admission-`)
				if err != nil {
					t.Fatal(err)
				}
				out[c] = v
			}
			return out
		}
		seenBefore, metricBefore := hook.counts(), writes()
		var snap cmSnapshot
		snap.take(t, cl)
		time.Sleep(20 * time.Second)
		seenAfter, metricAfter := hook.counts(), writes()
		for k, n := range seenAfter {
			if n != seenBefore[k] {
				t.Errorf("%s: the webhook saw %d more controller writes in 20s of settling", k, n-seenBefore[k])
			}
		}
		for c, n := range metricAfter {
			if n != metricBefore[c] {
				t.Errorf("%s: kubectl_registry_sync_writes_total grew by %v in 20s of settling", c, n-metricBefore[c])
			}
		}
		snap.unchanged(t, cl)
		// A create, plus at most one rewrite, per stamped copy.
		for c, objs := range stamped {
			for _, o := range objs {
				if n := seenAfter[c+"/"+o]; n < 1 || n > 2 {
					t.Errorf("the controller of %s wrote its copy of %s %d times, want 1 or 2", c, o, n)
				}
			}
		}
		// The fought copy: a create and a few rewrites before the controller of second
		// holds it; third's copy, which nobody changes, is written exactly once.
		if n := seenAfter["second/fight-me"]; n < 2 || n > 7 {
			t.Errorf("the controller of second wrote its copy of fight-me %d times, want 2 to 7", n)
		}
		if n := seenAfter["third/fight-me"]; n != 1 {
			t.Errorf("the controller of third wrote its copy of fight-me %d times, want exactly 1", n)
		}
		t.Logf("controller writes seen by the webhook: %v; fighter's writes: %d; writes_total by cluster: %v", seenAfter, fights.Load(), metricAfter)
	})

	t.Run("originals are untouched and a clean copy stays in sync", func(t *testing.T) {
		for c, name := range map[string]string{"first": "from-first", "third": "from-third"} {
			cm := listAdmissionCM(t, cl[c])[name]
			if cm.Labels[stampLabel] != "" || cm.Labels[v1alpha1.OwnershipLabel] != "" {
				t.Errorf("the original %s on %s was changed: %v", name, c, cm.Labels)
			}
		}
		cm := listAdmissionCM(t, third)["fight-me"]
		if cm.Data["c"] != "3" || cm.Data["fought"] != "" {
			t.Errorf("third's copy of fight-me: %v", cm.Data)
		}
	})
}

// cmSnapshot holds the resourceVersions of the ConfigMaps of admissionNS on every cluster.
type cmSnapshot map[string]string

func (s *cmSnapshot) take(t *testing.T, cl map[string]client.Client) {
	t.Helper()
	*s = s.read(t, cl)
}

func (s cmSnapshot) read(t *testing.T, cl map[string]client.Client) cmSnapshot {
	t.Helper()
	out := cmSnapshot{}
	for name, c := range cl {
		var l corev1.ConfigMapList
		if err := c.List(context.Background(), &l, client.InNamespace(admissionNS)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range l.Items {
			out[name+"/"+cm.Name] = cm.ResourceVersion
		}
	}
	return out
}

func (s cmSnapshot) unchanged(t *testing.T, cl map[string]client.Client) {
	t.Helper()
	now := s.read(t, cl)
	for k, rv := range s {
		if now[k] != rv {
			t.Errorf("%s was written while settled (resourceVersion %s -> %s)", k, rv, now[k])
		}
	}
}

// listAdmissionCM returns the ConfigMaps of admissionNS on a cluster, by name.
func listAdmissionCM(t *testing.T, cl client.Client) map[string]corev1.ConfigMap {
	t.Helper()
	var l corev1.ConfigMapList
	if err := cl.List(context.Background(), &l, client.InNamespace(admissionNS)); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.ConfigMap{}
	for _, c := range l.Items {
		out[c.Name] = c
	}
	return out
}
