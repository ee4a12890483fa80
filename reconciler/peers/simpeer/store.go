package simpeer

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Errors of the store's writes.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrUnknown       = errors.New("resource not served")
)

// object is one stored version of an object: what selectors read, and its JSON with
// (full, as GET and watch events send it) and, for the core group, without apiVersion
// and kind (item, as a list's items are sent).
type object struct {
	namespace, name string
	rv              uint64
	labels          labels.Set
	fields          fields.Set
	full, item      []byte
	// uid and created are the object's metadata.uid and creationTimestamp, which an
	// update that omits them keeps, as an API server does.
	uid, created any
}

// event is one change of the store, kept in its history for watches that resume.
type event struct {
	rv       uint64
	resource string
	typ      string // ADDED, MODIFIED, DELETED
	old, new *object
}

// store holds one simulated cluster's objects, every resource under one
// resourceVersion counter (as one etcd does), and the recent history of its changes.
type store struct {
	mu        sync.Mutex
	resources map[string]Resource
	objects   map[string]map[string]*object // resource -> namespace/name -> object
	rv        uint64
	// history holds the last historySize events; compacted is the resourceVersion of
	// the last event dropped from it (a watch from an older version is answered 410).
	history     []event
	historySize int
	compacted   uint64
	watchers    map[string]map[*watcher]struct{}
}

func newStore(resources []Resource, historySize int) *store {
	s := &store{resources: map[string]Resource{}, objects: map[string]map[string]*object{}, historySize: historySize,
		watchers: map[string]map[*watcher]struct{}{}, rv: 1}
	for _, r := range resources {
		s.resources[r.Key()] = r
		s.objects[r.Key()] = map[string]*object{}
	}
	return s
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

// encode builds the stored version of obj at resourceVersion rv (set in its metadata).
func encode(r Resource, obj map[string]any, rv uint64) (*object, error) {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return nil, errors.New("the object has no metadata")
	}
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if name == "" {
		return nil, errors.New("the object has no name")
	}
	if r.Namespaced != (ns != "") {
		return nil, fmt.Errorf("%s: namespaced is %v, the object's namespace is %q", r.Resource, r.Namespaced, ns)
	}
	md["resourceVersion"] = strconv.FormatUint(rv, 10)
	obj["apiVersion"], obj["kind"] = r.GroupVersion(), r.Kind
	full, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	o := &object{namespace: ns, name: name, rv: rv, full: full, item: full, uid: md["uid"], created: md["creationTimestamp"],
		fields: fields.Set{"metadata.name": name, "metadata.namespace": ns}}
	if t, ok := obj["type"].(string); ok {
		o.fields["type"] = t
	}
	if l, ok := md["labels"].(map[string]any); ok {
		o.labels = labels.Set{}
		for k, v := range l {
			if s, ok := v.(string); ok {
				o.labels[k] = s
			}
		}
	}
	if r.Group == "" {
		// A real API server's lists of built-in kinds carry no apiVersion and kind in
		// their items.
		delete(obj, "apiVersion")
		delete(obj, "kind")
		if o.item, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// put creates (create true) or updates the object obj of resource r; an update of an
// object that does not exist is an error, as is a create of one that does.
func (s *store) put(r Resource, obj map[string]any, create bool) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.objects[r.Key()]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrUnknown, r.Key())
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return 0, errors.New("the object has no metadata")
	}
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	old := objs[objectKey(ns, name)]
	switch {
	case create && old != nil:
		return 0, fmt.Errorf("%w: %s %s", ErrAlreadyExists, r.Resource, objectKey(ns, name))
	case !create && old == nil:
		return 0, fmt.Errorf("%w: %s %s", ErrNotFound, r.Resource, objectKey(ns, name))
	}
	if create {
		if _, ok := md["uid"]; !ok {
			md["uid"] = string(uuid.NewUUID())
		}
		if _, ok := md["creationTimestamp"]; !ok {
			md["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		}
	} else {
		// An update keeps what the API server set at creation.
		if _, ok := md["uid"]; !ok && old.uid != nil {
			md["uid"] = old.uid
		}
		if _, ok := md["creationTimestamp"]; !ok && old.created != nil {
			md["creationTimestamp"] = old.created
		}
	}
	o, err := encode(r, obj, s.rv+1)
	if err != nil {
		return 0, err
	}
	s.rv++
	objs[objectKey(ns, name)] = o
	typ := "MODIFIED"
	if create {
		typ = "ADDED"
	}
	s.record(event{rv: s.rv, resource: r.Key(), typ: typ, old: old, new: o})
	return s.rv, nil
}

// remove deletes an object; its DELETED event carries its last state at the new
// resourceVersion, as an API server's does.
func (s *store) remove(r Resource, namespace, name string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.objects[r.Key()]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrUnknown, r.Key())
	}
	old := objs[objectKey(namespace, name)]
	if old == nil {
		return 0, fmt.Errorf("%w: %s %s", ErrNotFound, r.Resource, objectKey(namespace, name))
	}
	var obj map[string]any
	if err := json.Unmarshal(old.full, &obj); err != nil {
		return 0, err
	}
	gone, err := encode(r, obj, s.rv+1)
	if err != nil {
		return 0, err
	}
	s.rv++
	delete(objs, objectKey(namespace, name))
	s.record(event{rv: s.rv, resource: r.Key(), typ: "DELETED", old: old, new: gone})
	return s.rv, nil
}

// record appends ev to the history, dropping the oldest beyond its size, and hands it to
// the watchers of its resource. Called with mu held.
func (s *store) record(ev event) {
	s.history = append(s.history, ev)
	if over := len(s.history) - s.historySize; over > 0 {
		s.compacted = s.history[over-1].rv
		s.history = append(s.history[:0:0], s.history[over:]...)
	}
	for w := range s.watchers[ev.resource] {
		w.deliver(ev)
	}
}

// compact drops every event of the history: a watch from any version before now is
// answered 410 Gone, as after an etcd compaction.
func (s *store) compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rv
	s.history = nil
}

// list returns the objects of resource r in namespace ("" for all) that match, sorted
// by key, and the resourceVersion of the list.
func (s *store) list(r Resource, namespace string, sel selectors) ([]*object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(r, namespace, sel), s.rv
}

func (s *store) listLocked(r Resource, namespace string, sel selectors) []*object {
	var out []*object
	for _, o := range s.objects[r.Key()] {
		if (namespace == "" || o.namespace == namespace) && sel.matches(o) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return objectKey(out[i].namespace, out[i].name) < objectKey(out[j].namespace, out[j].name)
	})
	return out
}

func (s *store) get(r Resource, namespace, name string) *object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[r.Key()][objectKey(namespace, name)]
}

// selectors are a request's label and field selectors.
type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

func (sel selectors) matches(o *object) bool {
	return (sel.labels == nil || sel.labels.Matches(o.labels)) && (sel.fields == nil || sel.fields.Matches(o.fields))
}
