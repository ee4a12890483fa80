package peers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

// TestIssuedCredentialFollowed: the credential a peer issued this cluster, watched by
// name apart from the peer's other Secrets, is followed as the peer renews, deletes and
// issues it again, with its bootstrap credential and with a reader of its own, and each
// change tells the subscribers.
func TestIssuedCredentialFollowed(t *testing.T) {
	g, err := simpeer.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Options{HealthInterval: 100 * time.Millisecond, FailureThreshold: 1, MaxBackoff: 200 * time.Millisecond, Addresses: kubeconfig.AddressPolicy{AllowLoopback: true}})
	events := make(chan event.GenericEvent, 1024)
	m.Subscribe(events)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := run(t, m, ctx)
	t.Cleanup(func() { cancel(); <-stopped })

	key := client.ObjectKey{Namespace: v1alpha1.DefaultNamespace, Name: v1alpha1.IssuedReaderSecretName("local")}
	for _, bootstrap := range []bool{true, false} {
		t.Run(fmt.Sprintf("bootstrap %v", bootstrap), func(t *testing.T) {
			name := fmt.Sprintf("peer-%v", bootstrap)
			srv := startSimPeer(t, g, name, simpeer.Options{})
			issue := func(data string, op func(simpeer.Resource, map[string]any) (string, error)) {
				t.Helper()
				write(t, op, simpeer.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{v1alpha1.ReaderForLabel: "local"}},
					Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.SealedKubeconfigKey: []byte(data)}})
			}
			issue("v1", srv.Create)
			ensureSimPeer(t, m, g, srv, name, bootstrap)
			rd := waitSynced(t, m, name).Reader()
			// held waits until the reader holds the credential with data want ("": none),
			// and for an event of the peer after the change.
			held := func(want string) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					var got corev1.Secret
					err := rd.Get(context.Background(), key, &got)
					var list corev1.SecretList
					if lerr := rd.List(context.Background(), &list, client.InNamespace(key.Namespace)); lerr != nil {
						t.Fatal(lerr)
					}
					listed := 0
					for _, s := range list.Items {
						if s.Name == key.Name && string(s.Data[v1alpha1.SealedKubeconfigKey]) == want {
							listed++
						}
					}
					switch {
					case want == "" && apierrors.IsNotFound(err) && len(list.Items) == 0:
						return
					case want != "" && err == nil && string(got.Data[v1alpha1.SealedKubeconfigKey]) == want && listed == 1:
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("the credential held is not %q: %v, %+v; listed %+v", want, err, got, list.Items)
					}
				}
			}
			drain := func() {
				for {
					select {
					case <-events:
					default:
						return
					}
				}
			}
			told := func() {
				t.Helper()
				for deadline := time.After(10 * time.Second); ; {
					select {
					case ev := <-events:
						if ev.Object.GetName() == name {
							return
						}
					case <-deadline:
						t.Fatal("no event of the peer after its credential changed")
					}
				}
			}
			held("v1")
			for _, step := range []struct {
				data string
				op   func()
			}{
				{"v2", func() { issue("v2", srv.Update) }},
				{"", func() {
					if _, err := srv.Delete(simpeer.Secrets, key.Namespace, key.Name); err != nil {
						t.Fatal(err)
					}
				}},
				{"v3", func() { issue("v3", srv.Create) }},
			} {
				drain()
				step.op()
				held(step.data)
				told()
			}
		})
	}
}

// TestIssuedWatchFollowsTheServer: the watch of the credential issued to this cluster
// lists it, watches from the list's version, resumes from the last version seen when a
// watch ends, lists again when that version is gone (410), and drops every other Secret
// a server that ignores the field selector serves it; a failing request is retried, and
// neither a watch that ends at once without an event nor one whose fresh list's version
// is gone is made again at once.
func TestIssuedWatchFollowsTheServer(t *testing.T) {
	key := client.ObjectKey{Namespace: "ns", Name: "mine"}
	secret := func(name, rv, data string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": rv},
			"data":     map[string]any{"k": base64.StdEncoding.EncodeToString([]byte(data))}}
	}
	event := func(typ string, obj map[string]any) map[string]any { return map[string]any{"type": typ, "object": obj} }
	gone := event("ERROR", map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410})
	// The server's answers, in order: a request that does not match the next one fails
	// the test.
	type answer struct {
		query  string // watch and resourceVersion asked
		status int
		body   []map[string]any
	}
	list := func(rv string, items ...map[string]any) []map[string]any {
		return []map[string]any{{"apiVersion": "v1", "kind": "SecretList", "metadata": map[string]any{"resourceVersion": rv}, "items": items}}
	}
	answers := []answer{
		{query: "list", status: http.StatusInternalServerError, body: []map[string]any{{"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500}}},
		{query: "list", status: http.StatusOK, body: list("5", secret("other", "3", "x"), secret("mine", "4", "v1"))},
		{query: "watch 5", status: http.StatusOK, body: []map[string]any{event("ADDED", secret("other", "6", "x")), event("MODIFIED", secret("mine", "7", "v2"))}},
		{query: "watch 7", status: http.StatusOK, body: []map[string]any{event("BOOKMARK", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"resourceVersion": "9"}})}},
		{query: "watch 9", status: http.StatusOK, body: []map[string]any{gone}},
		{query: "list", status: http.StatusOK, body: list("12", secret("mine", "11", "v3"))},
		// The version of the list just made gone: listed again, but not at once.
		{query: "watch 12", status: http.StatusOK, body: []map[string]any{gone}},
		{query: "list", status: http.StatusOK, body: list("12", secret("mine", "11", "v3"))},
		{query: "watch 12", status: http.StatusOK, body: []map[string]any{event("DELETED", secret("mine", "13", "v3"))}},
		{query: "watch 13", status: http.StatusOK}, // ends at once, without an event
	}
	const freshGone = 6 // the answer of the watch whose fresh list's version is gone
	var mu sync.Mutex
	next := 0
	var at []time.Time
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("fieldSelector") != "metadata.name=mine" || r.URL.Path != "/api/v1/namespaces/ns/secrets" {
			t.Errorf("request %s", r.URL)
		}
		got := "list"
		if q.Get("watch") == "true" {
			got = "watch " + q.Get("resourceVersion")
		}
		mu.Lock()
		i := next
		next++
		at = append(at, time.Now())
		mu.Unlock()
		if i >= len(answers) {
			if got != "watch 13" {
				t.Errorf("request %d: %s, want watch 13", i, got)
			}
			if i == len(answers) {
				close(done)
			}
			<-r.Context().Done() // the last watch stays open
			return
		}
		a := answers[i]
		if got != a.query {
			t.Errorf("request %d: %s, want %s", i, got, a.query)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		for _, b := range a.body {
			_ = json.NewEncoder(w).Encode(b)
		}
	}))
	defer srv.Close()
	cs, err := corev1client.NewForConfigAndClient(&rest.Config{Host: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	w := newIssuedWatch(key, func(o any) (any, error) { return o, nil })
	w.notify = func() {
		data := "none"
		if s := w.get(); s != nil {
			data = string(s.Data["k"])
		}
		mu.Lock()
		seen = append(seen, data)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.run(ctx, cs.RESTClient()); close(stopped) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the watch made %d of the %d requests expected", next, len(answers)+1)
	}
	cancel()
	<-stopped
	mu.Lock()
	defer mu.Unlock()
	if gap := at[len(answers)].Sub(at[len(answers)-1]); gap < issuedRetryFirst*9/10 {
		t.Errorf("a watch that ended at once was watched again after %s", gap)
	}
	if gap := at[freshGone+1].Sub(at[freshGone]); gap < issuedRetryFirst*9/10 {
		t.Errorf("the version of a fresh list gone, it was listed again after %s", gap)
	}
	if diff := cmp.Diff([]string{"v1", "v2", "v3", "none"}, seen); diff != "" {
		t.Errorf("the Secret held, at each notification (-want +got):\n%s", diff)
	}
}
