package simpeer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// defaultWatchTimeout is how long a watch without timeoutSeconds lasts (an API server's
// --min-request-timeout, 30 min, is the shortest it picks).
const defaultWatchTimeout = 30 * time.Minute

// initialEventsEnd is the annotation of the bookmark that ends a watch-list's initial
// events (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = "k8s.io/initial-events-end"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !s.accepts(bearer(r)) {
		s.add(func(c *counts) { c.request("unauthorized") })
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized", nil)
		return
	}
	if r.Method != http.MethodGet {
		s.add(func(c *counts) { c.request("other") })
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "the simulated peer is read only", nil)
		return
	}
	if doc, ct, ok := s.disc.lookup(r.URL.Path, r.Header.Get("Accept")); ok {
		s.add(func(c *counts) { c.request("discovery") })
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(doc)
		return
	}
	res, ns, name, ok := s.route(r.URL.Path)
	if !ok {
		s.add(func(c *counts) { c.request("other") })
		writeStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource", nil)
		return
	}
	q := r.URL.Query()
	if name != "" {
		s.add(func(c *counts) { c.request("get") })
		o := s.store.get(res, ns, name)
		if o == nil {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", res.Resource, name), nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(o.full)
		return
	}
	sel, err := parseSelectors(res, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		s.add(func(c *counts) { c.request("other") })
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error(), nil)
		return
	}
	if s.opts.IgnoreSelectors {
		sel = selectors{}
	}
	if v := q.Get("watch"); v == "true" || v == "1" {
		s.add(func(c *counts) { c.request("watch") })
		s.watch(w, r, res, ns, sel)
		return
	}
	s.add(func(c *counts) { c.request("list") })
	s.list(w, q.Get("resourceVersion"), q.Get("resourceVersionMatch"), res, ns, sel)
}

// route resolves a path to a served resource, a namespace and a name.
func (s *Server) route(path string) (res Resource, ns, name string, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var gv string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		gv, segs = segs[1], segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		gv, segs = segs[1]+"/"+segs[2], segs[3:]
	default:
		return Resource{}, "", "", false
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		ns, segs = segs[1], segs[2:]
	}
	if len(segs) == 0 || len(segs) > 2 {
		return Resource{}, "", "", false
	}
	res, ok = s.res[gv+"/"+segs[0]]
	if !ok || (ns != "" && !res.Namespaced) {
		return Resource{}, "", "", false
	}
	if len(segs) == 2 {
		name = segs[1]
	}
	return res, ns, name, true
}

// parseSelectors parses a request's selectors; field selectors on other fields than an
// API server supports for every kind (and a Secret's type) are refused, as it does.
func parseSelectors(res Resource, label, field string) (selectors, error) {
	var sel selectors
	var err error
	if label != "" {
		if sel.labels, err = labels.Parse(label); err != nil {
			return sel, fmt.Errorf("unable to parse requirement: %w", err)
		}
	}
	if field != "" {
		if sel.fields, err = fields.ParseSelector(field); err != nil {
			return sel, fmt.Errorf("invalid field selector: %w", err)
		}
		for _, r := range sel.fields.Requirements() {
			switch {
			case r.Field == "metadata.name", r.Field == "metadata.namespace":
			case r.Field == "type" && res == Secrets:
			default:
				return sel, fmt.Errorf("field label not supported: %s", r.Field)
			}
		}
	}
	return sel, nil
}

// list answers a list: the current objects at the current resourceVersion. A list at a
// version newer than the server's is answered 504 (an API server waits for it first);
// an exact version older than the current one 410 (no older snapshots are kept).
func (s *Server) list(w http.ResponseWriter, rv, match string, res Resource, ns string, sel selectors) {
	if rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid resource version %q", rv), nil)
			return
		}
		cur := s.store.currentRV()
		switch {
		case n > cur:
			writeTooLarge(w)
			return
		case match == "Exact" && n != cur:
			writeStatus(w, http.StatusGone, "Expired", errExpired.Error(), nil)
			return
		}
	}
	objs, cur := s.store.list(res, ns, sel)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`, res.Kind+"List", res.GroupVersion(), cur)
	var bytes int64
	for i, o := range objs {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		if _, err := w.Write(o.item); err != nil {
			return // the client went away
		}
		bytes += int64(len(o.item))
	}
	if _, err := io.WriteString(w, "]}"); err == nil {
		s.add(func(c *counts) { c.initialServed(res.Key(), bytes) })
	}
}

// watch serves a watch until its timeout, the client going, the watcher falling behind
// or the server closing.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, res Resource, ns string, sel selectors) {
	p, ok := s.watchParams(w, r.URL.Query())
	if !ok {
		return
	}
	wt, start, err := s.store.watch(res, ns, sel, p.initial, p.from)
	w.Header().Set("Content-Type", "application/json")
	ws := &watchStream{s: s, w: w, res: res, wt: wt}
	ws.flusher, _ = w.(http.Flusher)
	if err != nil {
		ws.refuse(err, p.rv)
		return
	}
	defer s.store.unwatch(wt)
	s.add(func(c *counts) { c.watch(res.Key(), 1) })
	defer s.add(func(c *counts) { c.watch(res.Key(), -1) })
	token := bearer(r)
	s.watchOf(token, 1)
	defer s.watchOf(token, -1)
	w.WriteHeader(http.StatusOK)
	last, ok := ws.begin(start, p.listing)
	if !ok {
		return
	}
	ws.follow(r.Context().Done(), last, p)
}

// watchRequest is what a watch request asks for.
type watchRequest struct {
	// rv is its resourceVersion; from the version it resumes from, when rv is neither ""
	// nor "0".
	rv   string
	from uint64
	// initial: it starts with every object that matches now (a watch from "" or "0", or
	// a watch-list); listing: a watch-list, whose initial objects end with a bookmark.
	initial, listing bool
	// bookmarks: it allows bookmarks.
	bookmarks bool
	timeout   time.Duration
}

// watchParams reads the parameters of a watch request. On one an API server refuses (a
// watch-list without the feature or its required options, a bad or future version), it
// writes the API server's status and returns false.
func (s *Server) watchParams(w http.ResponseWriter, q url.Values) (watchRequest, bool) {
	p := watchRequest{bookmarks: q.Get("allowWatchBookmarks") == "true", rv: q.Get("resourceVersion")}
	p.initial = p.rv == "" || p.rv == "0"
	if q.Get("sendInitialEvents") == "true" {
		if s.opts.NoWatchList {
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled", nil)
			return p, false
		}
		if q.Get("resourceVersionMatch") != "NotOlderThan" || !p.bookmarks {
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true", nil)
			return p, false
		}
		p.initial, p.listing = true, true
	}
	if p.rv != "" && p.rv != "0" {
		n, err := strconv.ParseUint(p.rv, 10, 64)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid resource version %q", p.rv), nil)
			return p, false
		}
		p.from = n
		if p.listing && n > s.store.currentRV() {
			writeTooLarge(w)
			return p, false
		}
	}
	p.timeout = defaultWatchTimeout
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		p.timeout = time.Duration(t) * time.Second
	}
	return p, true
}

// watchStream is the response of one watch of resource res: the events watcher wt is
// handed, written to w.
type watchStream struct {
	s       *Server
	w       http.ResponseWriter
	flusher http.Flusher // nil when w cannot flush
	res     Resource
	wt      *watcher
}

// flush sends what has been written so far.
func (ws *watchStream) flush() {
	if ws.flusher != nil {
		ws.flusher.Flush()
	}
}

// sent counts n events sent.
func (ws *watchStream) sent(n int64) { ws.s.add(func(c *counts) { c.events.Add(n) }) }

// bookmark writes a bookmark at version rv; end marks the end of a watch-list's initial
// events.
func (ws *watchStream) bookmark(rv uint64, end bool) error {
	ws.s.add(func(c *counts) { c.bookmarks.Add(1) })
	anns := ""
	if end {
		anns = fmt.Sprintf(`,"annotations":{%q:"true"}`, initialEventsEnd)
	}
	return writeEvent(ws.w, "BOOKMARK", fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d","creationTimestamp":null%s}}`, ws.res.Kind, ws.res.GroupVersion(), rv, anns))
}

// refuse ends a watch the store would not start (err) as an API server's watch cache
// does: the watch is accepted, and its one event says why it ends (rv is the version
// asked).
func (ws *watchStream) refuse(err error, rv string) {
	ws.w.WriteHeader(http.StatusOK)
	switch {
	case errors.Is(err, errExpired):
		_ = writeEvent(ws.w, "ERROR", statusJSON(http.StatusGone, "Expired", "too old resource version: "+rv, nil))
	case errors.Is(err, errTooLarge):
		_ = writeEvent(ws.w, "ERROR", statusJSON(http.StatusGatewayTimeout, "Timeout", "Too large resource version", tooLargeDetails))
	default:
		_ = writeEvent(ws.w, "ERROR", statusJSON(http.StatusInternalServerError, "InternalError", err.Error(), nil))
	}
	ws.flush()
}

// begin writes what the watch sends first: the initial objects (for a watch-list, with
// the bookmark that ends them) or the replayed history. It returns the last version
// sent, and false when the client has gone.
func (ws *watchStream) begin(start watchStart, listing bool) (last uint64, ok bool) {
	var bytes int64
	for _, o := range start.initial {
		if writeEvent(ws.w, "ADDED", o.full) != nil {
			return 0, false
		}
		bytes += int64(len(o.full))
	}
	ws.sent(int64(len(start.initial)))
	if listing {
		if ws.bookmark(start.rv, true) != nil {
			return 0, false
		}
		ws.s.add(func(c *counts) { c.initialServed(ws.res.Key(), bytes) })
	}
	last = start.rv
	for _, ev := range start.replay {
		if typ, o, ok := ws.wt.translate(ev); ok {
			if writeEvent(ws.w, typ, o.full) != nil {
				return 0, false
			}
			ws.sent(1)
		}
		last = ev.rv
	}
	ws.flush()
	return last, true
}

// follow writes the watcher's events after version last, and bookmarks when p allows
// them, until p's timeout, the client going (done), the watcher falling behind or the
// server closing.
func (ws *watchStream) follow(done <-chan struct{}, last uint64, p watchRequest) {
	deadline := time.NewTimer(p.timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if p.bookmarks {
		t := time.NewTicker(ws.s.opts.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-ws.wt.ch:
			if ev.rv <= last {
				continue // already sent in the replay
			}
			last = ev.rv
			if typ, o, ok := ws.wt.translate(ev); ok {
				if writeEvent(ws.w, typ, o.full) != nil {
					return
				}
				ws.sent(1)
			}
			if len(ws.wt.ch) == 0 {
				ws.flush()
			}
		case <-tick:
			if ws.bookmark(ws.s.store.progress(ws.wt, last), false) != nil {
				return
			}
			ws.flush()
		case <-ws.wt.overflow:
			return
		case <-deadline.C:
			return
		case <-done:
			return
		case <-ws.s.closing:
			return
		}
	}
}

// progress returns the resourceVersion a bookmark of watcher w may carry: the store's,
// when w has been handed every event (none waits in its buffer), else the last one it
// sent.
func (s *store) progress(w *watcher, last uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(w.ch) == 0 {
		return max(s.rv, last)
	}
	return last
}

func writeEvent(w io.Writer, typ string, obj []byte) error {
	if _, err := fmt.Fprintf(w, `{"type":%q,"object":`, typ); err != nil {
		return err
	}
	if _, err := w.Write(obj); err != nil {
		return err
	}
	_, err := io.WriteString(w, "}\n")
	return err
}

var tooLargeDetails = map[string]any{"causes": []any{map[string]any{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}}, "retryAfterSeconds": 1}

func statusJSON(code int, reason, msg string, details map[string]any) []byte {
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": msg, "reason": reason, "code": code}
	if details != nil {
		st["details"] = details
	}
	b, _ := json.Marshal(st)
	return b
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string, details map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(statusJSON(code, reason, msg, details))
}

func writeTooLarge(w http.ResponseWriter) {
	writeStatus(w, http.StatusGatewayTimeout, "Timeout", "Too large resource version", tooLargeDetails)
}
