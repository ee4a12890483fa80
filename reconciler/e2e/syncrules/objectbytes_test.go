package syncrules

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/e2e/harness"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/hostilepeer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

const bytesNS = "bytes"

// TestHostileObjectBytes: first's API server turns hostile (its admin controls it): a
// fake server takes its address, presents its certificate, passes every request on to
// it, but answers the ConfigMaps of namespace bytes with a list holding a 300 MB
// ConfigMap, streamed, never held, by the fake. Second, whose rule syncs those
// ConfigMaps from first, reads at most a few MiB of it: the rule is Degraded naming
// first and the byte limit, with a ResponseTooLarge event, the copy made before is kept,
// second's controller keeps running with its RSS far under the Deployment's limit, and
// once first answers honestly again the rule syncs again.
func TestHostileObjectBytes(t *testing.T) {
	testbed.SkipIfNoAssets(t)
	names := []string{"first", "second", "third"}
	cl, controllers := harness.FormGroupControllers(t, bed, func(n string) []string {
		return []string{"--max-peer-objects-retry=2s"}
	}, names...)
	first, second := cl["first"], cl["second"]
	ctx := context.Background()
	harness.Grant(t, cl, "", "configmaps")
	for _, n := range names {
		if err := cl[n].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bytesNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = cl[n].Delete(ctx, &v1alpha1.ResourceSyncRule{ObjectMeta: metav1.ObjectMeta{Name: "bytes"}})
			_ = cl[n].DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(bytesNS))
		}
	})
	if err := first.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bytesNS, Name: "small"}, Data: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}
	applyRule(t, second, `
apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata: {name: bytes}
spec:
  groupVersionKind: {version: v1, kind: ConfigMap}
  rules:
  - match: [{namespaces: [`+bytesNS+`]}]
`)
	copied := func() error {
		var c corev1.ConfigMap
		if err := second.Get(ctx, client.ObjectKey{Namespace: bytesNS, Name: "small"}, &c); err != nil {
			return err
		}
		if c.Annotations[v1alpha1.OwnershipAnnotation] == "" {
			return fmt.Errorf("second's small is not a copy")
		}
		return nil
	}
	harness.Eventually(t, 60*time.Second, "first's ConfigMap synced to second", copied)

	// First turns hostile: the fake takes its address.
	fc := bed.Cluster("first")
	hp := hostilepeer.New("unused")
	defer hp.Close()
	hp.Namespace, hp.BigObjectBytes, hp.BigIn = bytesNS, 300<<20, hostilepeer.InList
	certFile, keyFile := fc.ServingCertFiles()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(fc.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(fc.CAData())
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	rp.FlushInterval = -1 // watches
	hostile := hp.Handler()
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/namespaces/"+bytesNS+"/configmaps") {
			hostile.ServeHTTP(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	before, err := rssBytes(controllers["second"].Pid())
	if err != nil {
		t.Fatal(err)
	}
	peak := before
	if err := fc.Cut(); err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", strings.TrimPrefix(fc.Host(), "https://"), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		_ = fc.Heal()
		t.Fatal(err)
	}
	go func() { _ = fake.Serve(ln) }()
	healed := false
	heal := func() {
		if !healed {
			healed = true
			_ = fake.Close()
			if err := fc.Heal(); err != nil {
				t.Error(err)
			}
		}
	}
	defer heal()

	harness.Eventually(t, 90*time.Second, "second refuses first's 300 MB ConfigMap", func() error {
		if rss, err := rssBytes(controllers["second"].Pid()); err == nil && rss > peak {
			peak = rss
		}
		r, err := ruleStatus(second, "bytes")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.RuleConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonResponseTooLarge {
			return fmt.Errorf("Degraded: %+v", c)
		}
		for _, want := range []string{"peer first", "over a byte limit", "larger than 3 MiB", "are kept"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("the condition does not say %q: %s", want, c.Message)
			}
		}
		var evs corev1.EventList
		if err := second.List(ctx, &evs); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == v1alpha1.ReasonResponseTooLarge && e.InvolvedObject.Name == "bytes" {
				return nil
			}
		}
		return fmt.Errorf("no ResponseTooLarge event on the rule")
	})
	harness.Stays(t, 8*time.Second, "second's copy while first is hostile", func() error {
		if rss, err := rssBytes(controllers["second"].Pid()); err == nil && rss > peak {
			peak = rss
		}
		return copied()
	})
	if !controllers["second"].Running() {
		t.Fatal("second's controller exited")
	}
	t.Logf("second's controller RSS: %d MiB before, %d MiB at most while first served a 300 MB ConfigMap; the fake wrote %d KiB in all, at most %d KiB to one request",
		before>>20, peak>>20, hp.Written.Load()>>10, hp.MaxWritten.Load()>>10)
	if peak > 160<<20 || peak-before > 64<<20 {
		t.Errorf("second's controller grew from %d to %d MiB (the Deployment's limit is %d MiB)", before>>20, peak>>20, controllerMemoryLimit>>20)
	}
	if w := hp.MaxWritten.Load(); w > 32<<20 {
		t.Errorf("one request read %d MiB of the 300 MB ConfigMap", w>>20)
	}

	// First honest again: the rule syncs again.
	heal()
	harness.Eventually(t, 90*time.Second, "the rule syncs again", func() error {
		if _, err := condition(second, "bytes", v1alpha1.RuleConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAllSourcesOK); err != nil {
			return err
		}
		return copied()
	})
}
