package simpeer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

const testToken = "secret-token"

// start starts a server of a new group with opts (UID and token filled in) and returns
// it with a clientset that reads it.
func start(t *testing.T, opts Options) (*Server, kubernetes.Interface) {
	t.Helper()
	g, err := NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	if opts.UID == "" {
		opts.UID = "11111111-2222-3333-4444-555555555555"
	}
	if opts.Token == "" {
		opts.Token = testToken
	}
	s, err := g.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cs, err := kubernetes.NewForConfig(config(s, g, opts.Token))
	if err != nil {
		t.Fatal(err)
	}
	return s, cs
}

func config(s *Server, g *Group, token string) *rest.Config {
	return &rest.Config{Host: s.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: g.CAData()}, Timeout: 10 * time.Second}
}

func configMap(ns, name string, labels map[string]string) map[string]any {
	md := map[string]any{"name": name, "namespace": ns}
	if labels != nil {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		md["labels"] = l
	}
	return map[string]any{"metadata": md, "data": map[string]any{"k": "v"}}
}

func mustCreate(t *testing.T, s *Server, r Resource, obj map[string]any) string {
	t.Helper()
	rv, err := s.Create(r, obj)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func TestTokenAndIdentity(t *testing.T) {
	s, cs := start(t, Options{UID: "the-cluster-id"})
	g, _ := NewGroup()
	ctx := context.Background()
	tests := []struct {
		name, token string
		wantUID     string
		wantUnauth  bool
	}{
		{name: "the peer's token reads kube-system and its UID", token: testToken, wantUID: "the-cluster-id"},
		{name: "another token is refused", token: "wrong", wantUnauth: true},
		{name: "no token is refused", token: "", wantUnauth: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cs
			if tt.token != testToken {
				cfg := config(s, g, tt.token)
				cfg.TLSClientConfig.CAData = nil
				cfg.TLSClientConfig.Insecure = true // the group's CA is another; the token is what is tested
				var err error
				if c, err = kubernetes.NewForConfig(cfg); err != nil {
					t.Fatal(err)
				}
			}
			ns, err := c.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if tt.wantUnauth {
				if !apierrors.IsUnauthorized(err) {
					t.Fatalf("got %v, want 401 Unauthorized", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantUID, string(ns.UID)); diff != "" {
				t.Errorf("kube-system UID (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTLSAndHTTP2(t *testing.T) {
	s, _ := start(t, Options{})
	g, _ := NewGroup()
	// A client that trusts another group's CA does not connect.
	other, err := kubernetes.NewForConfig(config(s, g, testToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{}); err == nil {
		t.Fatal("a client that does not trust the server's CA connected")
	}
	// client-go speaks HTTP/2 with it, as with an API server.
	hc, err := rest.HTTPClientFor(config(s, s.group, testToken))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(s.URL() + "/api/v1/namespaces/kube-system")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Errorf("%s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
	}
}

func TestListSelectors(t *testing.T) {
	s, cs := start(t, Options{})
	mustCreate(t, s, ConfigMaps, configMap("a", "one", map[string]string{"sync": "true", "tier": "x"}))
	mustCreate(t, s, ConfigMaps, configMap("a", "two", map[string]string{"sync": "false"}))
	mustCreate(t, s, ConfigMaps, configMap("b", "three", map[string]string{"sync": "true"}))
	mustCreate(t, s, ConfigMaps, configMap("b", "four", nil))
	tests := []struct {
		name                string
		namespace           string
		label, field        string
		want                []string
		wantBadRequest      bool
		wantNotFoundListing bool
	}{
		{name: "every namespace", want: []string{"a/one", "a/two", "b/four", "b/three"}},
		{name: "one namespace", namespace: "b", want: []string{"b/four", "b/three"}},
		{name: "label equality", label: "sync=true", want: []string{"a/one", "b/three"}},
		{name: "label existence", label: "sync", want: []string{"a/one", "a/two", "b/three"}},
		{name: "label notin", label: "sync notin (true)", want: []string{"a/two", "b/four"}},
		{name: "label and namespace", namespace: "a", label: "sync=true,tier=x", want: []string{"a/one"}},
		{name: "field name", field: "metadata.name=three", want: []string{"b/three"}},
		{name: "field namespace", field: "metadata.namespace!=a", want: []string{"b/four", "b/three"}},
		{name: "unsupported field", field: "data.k=v", wantBadRequest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := cs.CoreV1().ConfigMaps(tt.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: tt.label, FieldSelector: tt.field})
			if tt.wantBadRequest {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("got %v, want 400", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cm := range l.Items {
				got = append(got, cm.Namespace+"/"+cm.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
			if l.ResourceVersion != s.ResourceVersion() {
				t.Errorf("list resourceVersion %q, want the server's %q", l.ResourceVersion, s.ResourceVersion())
			}
		})
	}
}

// TestIgnoreSelectors: a server started with IgnoreSelectors (a hostile peer's) answers
// lists and watches with every object of the namespace, whatever their selectors ask.
func TestIgnoreSelectors(t *testing.T) {
	s, cs := start(t, Options{IgnoreSelectors: true})
	mustCreate(t, s, ConfigMaps, configMap("a", "one", map[string]string{"sync": "true"}))
	mustCreate(t, s, ConfigMaps, configMap("a", "two", nil))
	mustCreate(t, s, ConfigMaps, configMap("b", "three", nil))
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: "sync=true", FieldSelector: "metadata.name=one"}
	l, err := cs.CoreV1().ConfigMaps("a").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cm := range l.Items {
		got = append(got, cm.Name)
	}
	if diff := cmp.Diff([]string{"one", "two"}, got); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	opts.ResourceVersion = l.ResourceVersion
	w, err := cs.CoreV1().ConfigMaps("a").Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustCreate(t, s, ConfigMaps, configMap("a", "four", nil))
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != "four" {
			t.Errorf("watch event %s %T, want the ConfigMap four the selectors exclude", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Error("no watch event for an object the selectors exclude")
	}
}

func TestResourceVersionsIncrease(t *testing.T) {
	s, cs := start(t, Options{})
	ctx := context.Background()
	var last uint64
	for i := range 5 {
		rv := mustCreate(t, s, ConfigMaps, configMap("a", fmt.Sprint("cm-", i), nil))
		n, _ := strconv.ParseUint(rv, 10, 64)
		if n <= last {
			t.Fatalf("resourceVersion %d after %d", n, last)
		}
		last = n
	}
	cm, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "cm-4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strconv.FormatUint(last, 10), cm.ResourceVersion); diff != "" {
		t.Errorf("get resourceVersion (-want +got):\n%s", diff)
	}
	if _, err := cs.CoreV1().ConfigMaps("a").List(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatUint(last+10, 10)}); err == nil {
		t.Error("a list at a future resourceVersion was answered")
	}
}

// event is what a test sees of a watch event.
type seen struct {
	Type, Name, Annotation string
}

// collect reads n events of w (or fails after a while).
func collect(t *testing.T, w watch.Interface, n int) []seen {
	t.Helper()
	var out []seen
	timeout := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %v", out)
			}
			switch o := ev.Object.(type) {
			case *corev1.ConfigMap:
				out = append(out, seen{Type: string(ev.Type), Name: o.Name, Annotation: o.Annotations[initialEventsEnd]})
			case *metav1.Status:
				out = append(out, seen{Type: string(ev.Type), Name: fmt.Sprintf("%d %s", o.Code, o.Reason)})
			default:
				t.Fatalf("unexpected object %T", ev.Object)
			}
		case <-timeout:
			t.Fatalf("only %v after 5s, want %d events", out, n)
		}
	}
	return out
}

func TestWatch(t *testing.T) {
	sync := map[string]string{"sync": "true"}
	tests := []struct {
		name    string
		opts    metav1.ListOptions
		before  func(*Server)
		changes func(*testing.T, *Server)
		want    []seen
	}{{
		name: "from a version: the changes after it, in order",
		changes: func(t *testing.T, s *Server) {
			mustCreate(t, s, ConfigMaps, configMap("a", "new", nil))
			obj := configMap("a", "old", nil)
			obj["data"] = map[string]any{"k": "w"}
			if _, err := s.Update(ConfigMaps, obj); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Delete(ConfigMaps, "a", "new"); err != nil {
				t.Fatal(err)
			}
		},
		want: []seen{{Type: "ADDED", Name: "new"}, {Type: "MODIFIED", Name: "old"}, {Type: "DELETED", Name: "new"}},
	}, {
		name: "from version 0: the objects that exist, then the changes",
		opts: metav1.ListOptions{ResourceVersion: "0"},
		changes: func(t *testing.T, s *Server) {
			mustCreate(t, s, ConfigMaps, configMap("a", "new", nil))
		},
		want: []seen{{Type: "ADDED", Name: "old"}, {Type: "ADDED", Name: "new"}},
	}, {
		name: "a selector: objects that start or stop matching are added or deleted",
		opts: metav1.ListOptions{LabelSelector: "sync=true"},
		changes: func(t *testing.T, s *Server) {
			mustCreate(t, s, ConfigMaps, configMap("a", "unselected", nil))
			if _, err := s.Update(ConfigMaps, configMap("a", "unselected", sync)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(ConfigMaps, configMap("a", "unselected", nil)); err != nil {
				t.Fatal(err)
			}
		},
		want: []seen{{Type: "ADDED", Name: "unselected"}, {Type: "DELETED", Name: "unselected"}},
	}, {
		name: "a field selector and a namespace",
		opts: metav1.ListOptions{FieldSelector: "metadata.name=b1"},
		changes: func(t *testing.T, s *Server) {
			mustCreate(t, s, ConfigMaps, configMap("b", "b1", nil))
			mustCreate(t, s, ConfigMaps, configMap("b", "b2", nil))
			mustCreate(t, s, ConfigMaps, configMap("a", "b1", nil))
		},
		want: []seen{{Type: "ADDED", Name: "b1"}},
	}, {
		name:   "from a version older than the history: 410 Gone",
		before: func(s *Server) { s.Compact() },
		want:   []seen{{Type: "ERROR", Name: "410 Expired"}},
	}, {
		name: "a watch-list: the objects, then the bookmark that ends them",
		opts: metav1.ListOptions{SendInitialEvents: new(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true},
		changes: func(t *testing.T, s *Server) {
			mustCreate(t, s, ConfigMaps, configMap("a", "new", nil))
		},
		want: []seen{{Type: "ADDED", Name: "old"}, {Type: "BOOKMARK", Annotation: "true"}, {Type: "ADDED", Name: "new"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, cs := start(t, Options{})
			rv := mustCreate(t, s, ConfigMaps, configMap("a", "old", nil))
			if tt.before != nil {
				mustCreate(t, s, ConfigMaps, configMap("a", "before-compaction", nil))
				tt.before(s)
			}
			opts := tt.opts
			ns := ""
			if opts.FieldSelector != "" {
				ns = "b"
			}
			if opts.ResourceVersion == "" && opts.SendInitialEvents == nil {
				opts.ResourceVersion = rv
			}
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			if tt.changes != nil {
				tt.changes(t, s)
			}
			got := collect(t, w, len(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBookmarks(t *testing.T) {
	s, cs := start(t, Options{BookmarkInterval: 20 * time.Millisecond})
	rv := mustCreate(t, s, ConfigMaps, configMap("a", "old", nil))
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprintf("allowWatchBookmarks=%v", allow), func(t *testing.T) {
			w, err := cs.CoreV1().ConfigMaps("").Watch(context.Background(), metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: allow})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			select {
			case ev := <-w.ResultChan():
				cm, _ := ev.Object.(*corev1.ConfigMap)
				if !allow || ev.Type != watch.Bookmark || cm == nil || cm.ResourceVersion != s.ResourceVersion() {
					t.Fatalf("got %s %+v, want a bookmark at %s only when asked", ev.Type, ev.Object, s.ResourceVersion())
				}
			case <-time.After(200 * time.Millisecond):
				if allow {
					t.Fatal("no bookmark within 10 intervals")
				}
			}
		})
	}
}

func TestWatchTimeout(t *testing.T) {
	_, cs := start(t, Options{})
	timeout := int64(1)
	w, err := cs.CoreV1().ConfigMaps("").Watch(context.Background(), metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("an event on an empty store")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch outlived its timeoutSeconds")
	}
}

func TestWatchListRefused(t *testing.T) {
	_, cs := start(t, Options{NoWatchList: true})
	_, err := cs.CoreV1().ConfigMaps("").Watch(context.Background(), metav1.ListOptions{SendInitialEvents: new(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want 422 Invalid", err)
	}
}

// An informer of client-go syncs from the server and follows it, with watch-lists and
// without (then it lists first), and its watches are counted.
func TestInformer(t *testing.T) {
	for _, noWatchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWatchList=%v", noWatchList), func(t *testing.T) {
			s, cs := start(t, Options{NoWatchList: noWatchList})
			for i := range 3 {
				mustCreate(t, s, ConfigMaps, configMap("a", fmt.Sprint("cm-", i), map[string]string{"sync": "true"}))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "sync=true" }))
			inf := f.Core().V1().ConfigMaps().Informer()
			f.Start(ctx.Done())
			if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("not synced")
			}
			// The bytes of the initial state are those of the three objects selected: a
			// list's items exactly; a watch-list's events carry each object whole, its
			// kind and apiVersion too.
			synced := s.Stats()
			initialBytes := synced.InitialBytes["v1/configmaps"]
			raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/a/configmaps").Param("labelSelector", "sync=true").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var list struct{ Items []json.RawMessage }
			if err := json.Unmarshal(raw, &list); err != nil {
				t.Fatal(err)
			}
			var itemBytes int64
			for _, it := range list.Items {
				itemBytes += int64(len(it))
			}
			if len(list.Items) != 3 || initialBytes < itemBytes || (noWatchList && initialBytes != itemBytes) {
				t.Errorf("initial bytes %d for %d items of %d bytes", initialBytes, len(list.Items), itemBytes)
			}
			mustCreate(t, s, ConfigMaps, configMap("a", "later", map[string]string{"sync": "true"}))
			mustCreate(t, s, ConfigMaps, configMap("a", "unselected", nil))
			deadline := time.Now().Add(5 * time.Second)
			for len(inf.GetStore().ListKeys()) != 4 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if diff := cmp.Diff([]string{"a/cm-0", "a/cm-1", "a/cm-2", "a/later"}, sorted(inf.GetStore().ListKeys())); diff != "" {
				t.Errorf("informer (-want +got):\n%s", diff)
			}
			st := s.Stats()
			if diff := cmp.Diff(map[string]int64{"v1/configmaps": 1}, st.Watches); diff != "" {
				t.Errorf("open watches (-want +got):\n%s", diff)
			}
			if got := synced.Requests["list"]; (got > 0) != noWatchList {
				t.Errorf("%d lists with NoWatchList=%v", got, noWatchList)
			}
			if diff := cmp.Diff(map[string]int64{"v1/configmaps": 1}, synced.Initial); diff != "" {
				t.Errorf("initial states served (-want +got):\n%s", diff)
			}
			if st.Connections != 1 {
				t.Errorf("%d connections, want 1 (HTTP/2)", st.Connections)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func TestDiscovery(t *testing.T) {
	_, cs := start(t, Options{})
	dc, ok := cs.Discovery().(*discovery.DiscoveryClient)
	if !ok {
		t.Fatalf("discovery client %T", cs.Discovery())
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			got = append(got, l.GroupVersion+"/"+r.Name)
		}
	}
	want := []string{
		"v1/namespaces", "v1/configmaps", "v1/secrets",
		"clusterregistry.k8s.cisco.com/v1alpha1/clusters", "clusterregistry.k8s.cisco.com/v1alpha1/clusterfeatures",
		"clusterregistry.k8s.cisco.com/v1alpha1/resourcesyncrules", "clusterregistry.k8s.cisco.com/v1alpha1/syncpolicies",
	}
	if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
		t.Errorf("discovered resources (-want +got):\n%s", diff)
	}
}

// Unknown paths and writes are refused as an API server refuses them.
func TestRefusals(t *testing.T) {
	s, _ := start(t, Options{})
	hc, err := rest.HTTPClientFor(&rest.Config{Host: s.URL(), TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/api/v1/pods", http.StatusNotFound},
		{http.MethodGet, "/api/v1/namespaces/a/namespaces", http.StatusNotFound},
		{http.MethodPost, "/api/v1/namespaces/a/configmaps", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps/missing", http.StatusNotFound},
		{http.MethodGet, "/api/v1/configmaps?labelSelector=a%3D%3D%3D", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, s.URL()+tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// CaptureDiscovery reads what a server answers to discovery, the aggregated form
// included, and a server given it answers the same.
func TestCaptureDiscovery(t *testing.T) {
	src := BuiltinDiscovery(DefaultResources())
	src.Aggregated = map[string][]byte{"/api": []byte(`{"kind":"APIGroupDiscoveryList","items":[]}`), "/apis": []byte(`{"kind":"APIGroupDiscoveryList","items":[{"metadata":{"name":"x"}}]}`)}
	s, _ := start(t, Options{Discovery: src})
	cfg := config(s, s.group, testToken)
	got, err := CaptureDiscovery(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	str := func(m map[string][]byte) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = string(v)
		}
		return out
	}
	if diff := cmp.Diff(str(src.Docs), str(got.Docs)); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(str(src.Aggregated), str(got.Aggregated)); diff != "" {
		t.Errorf("aggregated documents (-want +got):\n%s", diff)
	}
	// A server without the aggregated form answers the plain documents to a client that
	// asks for it: none is captured.
	s2, _ := start(t, Options{})
	plain, err := CaptureDiscovery(context.Background(), config(s2, s2.group, testToken))
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Aggregated) != 0 {
		t.Errorf("aggregated documents captured from a server without them: %v", str(plain.Aggregated))
	}
}

// TestUpdateKeepsCreationMetadata: an update that omits the uid and creationTimestamp
// keeps them, as an API server does (the bench's heartbeats update a Cluster as created).
func TestUpdateKeepsCreationMetadata(t *testing.T) {
	s, cs := start(t, Options{})
	ctx := context.Background()
	mustCreate(t, s, ConfigMaps, configMap("a", "cm", nil))
	before, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ConfigMaps, configMap("a", "cm", map[string]string{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	after, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if before.UID == "" || after.UID != before.UID || !after.CreationTimestamp.Equal(&before.CreationTimestamp) {
		t.Errorf("uid %q, created %v after the update; want %q, %v", after.UID, after.CreationTimestamp, before.UID, before.CreationTimestamp)
	}
}
