package simpeer

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.opts.Token)) != 1 {
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
	for i, o := range objs {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		if _, err := w.Write(o.item); err != nil {
			return // the client went away
		}
	}
	if _, err := io.WriteString(w, "]}"); err == nil {
		s.add(func(c *counts) { c.initialServed(res.Key()) })
	}
}

// watch serves a watch until its timeout, the client going, the watcher falling behind
// or the server closing.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, res Resource, ns string, sel selectors) {
	q := r.URL.Query()
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	rv := q.Get("resourceVersion")
	initial, listing := rv == "" || rv == "0", false
	var from uint64
	if q.Get("sendInitialEvents") == "true" {
		if s.opts.NoWatchList {
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled", nil)
			return
		}
		if q.Get("resourceVersionMatch") != "NotOlderThan" || !bookmarks {
			writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true", nil)
			return
		}
		initial, listing = true, true
	}
	if rv != "" && rv != "0" {
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("invalid resource version %q", rv), nil)
			return
		}
		from = n
		if listing && n > s.store.currentRV() {
			writeTooLarge(w)
			return
		}
	}
	timeout := defaultWatchTimeout
	if t, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && t > 0 {
		timeout = time.Duration(t) * time.Second
	}
	wt, start, err := s.store.watch(res, ns, sel, initial, from)
	w.Header().Set("Content-Type", "application/json")
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if err != nil {
		// As an API server's watch cache: the watch is accepted, and its one event says why
		// it ends.
		w.WriteHeader(http.StatusOK)
		switch {
		case errors.Is(err, errExpired):
			_ = writeEvent(w, "ERROR", statusJSON(http.StatusGone, "Expired", "too old resource version: "+rv, nil))
		case errors.Is(err, errTooLarge):
			_ = writeEvent(w, "ERROR", statusJSON(http.StatusGatewayTimeout, "Timeout", "Too large resource version", tooLargeDetails))
		default:
			_ = writeEvent(w, "ERROR", statusJSON(http.StatusInternalServerError, "InternalError", err.Error(), nil))
		}
		flush()
		return
	}
	defer s.store.unwatch(wt)
	s.add(func(c *counts) { c.watch(res.Key(), 1) })
	defer s.add(func(c *counts) { c.watch(res.Key(), -1) })
	w.WriteHeader(http.StatusOK)
	sent := func(n int64) { s.add(func(c *counts) { c.events.Add(n) }) }
	bookmark := func(rv uint64, end bool) error {
		s.add(func(c *counts) { c.bookmarks.Add(1) })
		anns := ""
		if end {
			anns = fmt.Sprintf(`,"annotations":{%q:"true"}`, initialEventsEnd)
		}
		return writeEvent(w, "BOOKMARK", fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d","creationTimestamp":null%s}}`, res.Kind, res.GroupVersion(), rv, anns))
	}
	for _, o := range start.initial {
		if writeEvent(w, "ADDED", o.full) != nil {
			return
		}
	}
	sent(int64(len(start.initial)))
	if listing {
		if bookmark(start.rv, true) != nil {
			return
		}
		s.add(func(c *counts) { c.initialServed(res.Key()) })
	}
	last := start.rv
	for _, ev := range start.replay {
		if typ, o, ok := wt.translate(ev); ok {
			if writeEvent(w, typ, o.full) != nil {
				return
			}
			sent(1)
		}
		last = ev.rv
	}
	flush()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if bookmarks {
		t := time.NewTicker(s.opts.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-wt.ch:
			if ev.rv <= last {
				continue // already sent in the replay
			}
			last = ev.rv
			if typ, o, ok := wt.translate(ev); ok {
				if writeEvent(w, typ, o.full) != nil {
					return
				}
				sent(1)
			}
			if len(wt.ch) == 0 {
				flush()
			}
		case <-tick:
			if bookmark(s.store.progress(wt, last), false) != nil {
				return
			}
			flush()
		case <-wt.overflow:
			return
		case <-deadline.C:
			return
		case <-r.Context().Done():
			return
		case <-s.closing:
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
