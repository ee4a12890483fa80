// Package hostilepeer is a fake API server of a hostile member, for tests: it answers as
// a cluster (its kube-system namespace, discovery of the kinds the registry reads) and
// streams, without ever holding them, a ConfigMap as large as asked (in a list or a watch
// event) and as many Clusters as asked. It counts the bytes it wrote, so that a test can
// tell how much of it a client read.
package hostilepeer

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// Where the large ConfigMap is served.
const (
	// InList: the list of ConfigMaps holds it; watch-lists are refused (the client lists).
	InList = "list"
	// InWatch: every watch of ConfigMaps (a watch-list's initial events among them) sends
	// it after two small ones.
	InWatch = "watch"
)

// Server is the hostile API server.
type Server struct {
	*httptest.Server
	// UID is its kube-system namespace's UID: the cluster ID it answers as.
	UID types.UID
	// BigObjectBytes is the size of the data of the large ConfigMap (0: none), BigIn
	// where it is served (InList or InWatch).
	BigObjectBytes int64
	BigIn          string
	// Clusters is how many Clusters the lists of Clusters hold.
	Clusters int
	// Namespace is the namespace of the ConfigMaps it serves ("hostile" when empty).
	Namespace string
	// HugeNamespaceBytes, if set, is the size of an annotation of the kube-system
	// namespace it answers (every client's health check reads it).
	HugeNamespaceBytes int64
	// Written counts the bytes of every response written; MaxWritten is the most
	// written to one response (what the sockets buffer on loopback, a few MiB, included).
	Written, MaxWritten atomic.Int64
}

// New starts a TLS server answering as cluster uid (loopback; its CA is the server's
// certificate: Server.Certificate). Set the fields before a client connects.
func New(uid types.UID) *Server {
	s := &Server{UID: uid}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	return s
}

// Handler returns the server's handler, to serve its answers behind another listener.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

// countingWriter counts what is written to the response.
type countingWriter struct {
	w    http.ResponseWriter
	n    *atomic.Int64
	this *int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	*c.this += int64(n)
	return n, err
}

const group = "clusterregistry.k8s.cisco.com"

func (s *Server) serve(rw http.ResponseWriter, r *http.Request) {
	var this int64
	defer func() {
		for m := s.MaxWritten.Load(); this > m && !s.MaxWritten.CompareAndSwap(m, this); m = s.MaxWritten.Load() {
		}
	}()
	w := countingWriter{w: rw, n: &s.Written, this: &this}
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	json := func(body string) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
	p := r.URL.Path
	switch {
	case p == "/api/v1/namespaces/kube-system" && s.HugeNamespaceBytes > 0:
		json(fmt.Sprintf(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q,"annotations":{"a":"`, s.UID))
		if _, err := io.Copy(w, io.LimitReader(filler{}, s.HugeNamespaceBytes)); err == nil {
			_, _ = io.WriteString(w, `"}}}`)
		}
	case p == "/api/v1/namespaces/kube-system":
		json(fmt.Sprintf(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":%q}}`, s.UID))
	case p == "/api":
		json(`{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`)
	case p == "/apis":
		json(`{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"` + group + `","versions":[{"groupVersion":"` + group + `/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"` + group + `/v1alpha1","version":"v1alpha1"}}]}`)
	case p == "/api/v1":
		json(`{"kind":"APIResourceList","groupVersion":"v1","resources":[` +
			resource("configmaps", "ConfigMap", true) + `,` + resource("secrets", "Secret", true) + `,` + resource("namespaces", "Namespace", false) + `]}`)
	case p == "/apis/"+group+"/v1alpha1":
		json(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"` + group + `/v1alpha1","resources":[` +
			resource("clusters", "Cluster", false) + `,` + resource("clusterfeatures", "ClusterFeature", false) + `,` +
			resource("resourcesyncrules", "ResourceSyncRule", false) + `,` + resource("syncpolicies", "SyncPolicy", false) + `]}`)
	case strings.HasSuffix(p, "/configmaps"):
		s.configMaps(rw, w, r, watch)
	case strings.HasSuffix(p, "/clusters") && !watch:
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ClusterList","apiVersion":"`+group+`/v1alpha1","metadata":{"resourceVersion":"1"},"items":[`)
		for i := range s.Clusters {
			sep := ","
			if i == 0 {
				sep = ""
			}
			if _, err := fmt.Fprintf(w, `%s{"apiVersion":"%s/v1alpha1","kind":"Cluster","metadata":{"name":"relayed-%06d","resourceVersion":"1","uid":"u-%06d"},"spec":{"clusterID":"id-%06d"}}`, sep, group, i, i, i); err != nil {
				return // the client went away
			}
		}
		_, _ = io.WriteString(w, `]}`)
	case watch:
		s.idleWatch(rw, r)
	case strings.HasSuffix(p, "/secrets") || strings.HasSuffix(p, "/clusterfeatures") || strings.HasSuffix(p, "/resourcesyncrules") || strings.HasSuffix(p, "/syncpolicies"):
		json(`{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	default:
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

func resource(name, kind string, namespaced bool) string {
	return fmt.Sprintf(`{"name":%q,"singularName":"","namespaced":%v,"kind":%q,"verbs":["get","list","watch"]}`, name, namespaced, kind)
}

// idleWatch refuses a watch-list (the client lists instead) and holds any other watch
// open, sending nothing, until the client goes.
func (s *Server) idleWatch(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","message":"sendInitialEvents is not supported","code":422}`)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	if f, ok := rw.(http.Flusher); ok {
		f.Flush()
	}
	<-r.Context().Done()
}

// configMaps serves the ConfigMaps: the large one where BigIn says.
func (s *Server) configMaps(rw http.ResponseWriter, w io.Writer, r *http.Request, watch bool) {
	ns := s.Namespace
	if ns == "" {
		ns = "hostile"
	}
	small := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"` + ns + `","resourceVersion":"2"},"data":{"a":"b"}}`
	}
	big := func() error {
		if _, err := io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge","namespace":"`+ns+`","resourceVersion":"2"},"data":{"a":"`); err != nil {
			return err
		}
		if _, err := io.Copy(w, io.LimitReader(filler{}, s.BigObjectBytes)); err != nil {
			return err
		}
		_, err := io.WriteString(w, `"}}`)
		return err
	}
	if !watch {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"2"},"items":[`+small("small"))
		if s.BigIn == InList && s.BigObjectBytes > 0 {
			_, _ = io.WriteString(w, ",")
			if big() != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `]}`)
		return
	}
	if s.BigIn == InList && s.BigObjectBytes > 0 && r.URL.Query().Get("sendInitialEvents") != "true" {
		// A watch resumed from a resourceVersion (a client that listed before the server
		// turned hostile) is answered as expired, 410 Gone, as an API server answers one
		// too old: the client lists again, and gets the large object.
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}`+"\n")
		return
	}
	if s.BigIn != InWatch || s.BigObjectBytes == 0 {
		s.idleWatch(rw, r)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	for _, n := range []string{"small-1", "small-2"} {
		if _, err := io.WriteString(w, `{"type":"ADDED","object":`+small(n)+"}\n"); err != nil {
			return
		}
	}
	if _, err := io.WriteString(w, `{"type":"ADDED","object":`); err != nil || big() != nil {
		return
	}
	_, _ = io.WriteString(w, "}\n")
	<-r.Context().Done()
}

// filler reads as an endless run of 'x'.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
