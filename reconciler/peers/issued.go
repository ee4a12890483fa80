package peers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// issuedWatch holds the one Secret of a peer read by name: the credential the peer
// issued this cluster. It lists the Secret by a field selector on its name, then
// watches it from the list's resourceVersion, resuming from the last version seen when
// the watch ends, listing again when that version is gone (410; after a pause when it
// is the version of a list just made) and backing off on errors: one goroutine of its own and the watch's stream, where a second
// controller-runtime cache took 16 goroutines a peer, and client-go's reflector 5, more
// memory than not reading the other members' credentials saves (docs/performance.md).
// Any other object the peer serves it (a peer that ignores the selector serves every
// Secret) is dropped as it is decoded: it holds one object at most, and every answer is
// read through the connection's byte limits (limits.go; a list, at most
// MaxMembershipObjects items).
type issuedWatch struct {
	key       client.ObjectKey
	transform toolscache.TransformFunc
	// notify is called on every change of the Secret held, and on the first sync; peer
	// names the peer in the log.
	notify func()
	peer   string
	// synced is closed once the first list was held.
	synced chan struct{}

	mu   sync.Mutex
	obj  *corev1.Secret
	once sync.Once
}

func newIssuedWatch(key client.ObjectKey, transform toolscache.TransformFunc) *issuedWatch {
	return &issuedWatch{key: key, transform: transform, notify: func() {}, synced: make(chan struct{})}
}

// Waits of issuedWatch.run after a failed list or watch: doubling from the first to the
// last.
const (
	issuedRetryFirst = time.Second
	issuedRetryMax   = 30 * time.Second
)

// errShortWatch is a watch that ended at once without an event.
var errShortWatch = errors.New("the watch ended at once without an event")

// run follows the Secret with rc until ctx is done. The first failure of a run of
// failures is logged (with ctx's logger, as the cluster's other connection errors),
// and the recovery.
func (w *issuedWatch) run(ctx context.Context, rc rest.Interface) {
	log := logr.FromContextOrDiscard(ctx).WithValues("cluster", w.peer, "secret", w.key.String())
	rv := ""
	delay := issuedRetryFirst
	failing := false
	for ctx.Err() == nil {
		var err error
		fresh := rv == ""
		if fresh {
			rv, err = w.list(ctx, rc)
		}
		if err == nil {
			rv, err = w.watch(ctx, rc, rv)
		}
		gone := apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		if gone {
			rv = "" // that version is gone: list again
		}
		switch {
		case err == nil:
			if failing {
				log.Info("watching the credential the peer issued this cluster again")
			}
			delay, failing = issuedRetryFirst, false // the watch ended as watches do: resume from rv
			continue
		case gone && !fresh:
			continue // now; but not at once again when the version of a list just made is gone
		case ctx.Err() != nil:
			return
		}
		if !failing {
			log.Info("watching the credential the peer issued this cluster failed; retrying, backing off", "error", truncate(err.Error(), 512))
			failing = true
		}
		if !sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, issuedRetryMax)
	}
}

// selection is the field selector of the Secret watched.
func (w *issuedWatch) selection() string {
	return fields.OneTermEqualSelector("metadata.name", w.key.Name).String()
}

// list holds the Secret as the peer lists it (none when it is not listed) and returns
// the list's resourceVersion.
func (w *issuedWatch) list(ctx context.Context, rc rest.Interface) (string, error) {
	var list corev1.SecretList
	err := rc.Get().Namespace(w.key.Namespace).Resource("secrets").
		VersionedParams(&metav1.ListOptions{FieldSelector: w.selection()}, metav1.ParameterCodec).
		Do(ctx).Into(&list)
	if err != nil {
		return "", err
	}
	var held *corev1.Secret
	for i := range list.Items {
		if s, err := w.secret(&list.Items[i]); err != nil {
			return "", err
		} else if s != nil {
			held = s
		}
	}
	changed := w.hold(held)
	first := false
	w.once.Do(func() {
		close(w.synced)
		first = true
	})
	if changed || first {
		w.notify()
	}
	return list.ResourceVersion, nil
}

// watch follows the Secret's changes from resourceVersion rv until the watch ends, and
// returns the last version seen. An error event is returned as its status's error (410:
// rv is gone).
func (w *issuedWatch) watch(ctx context.Context, rc rest.Interface, rv string) (string, error) {
	timeout := int64(300 + rand.IntN(300)) // as client-go's reflector: 5 to 10 minutes
	body, err := rc.Get().Namespace(w.key.Namespace).Resource("secrets").
		VersionedParams(&metav1.ListOptions{Watch: true, FieldSelector: w.selection(), ResourceVersion: rv,
			AllowWatchBookmarks: true, TimeoutSeconds: &timeout}, metav1.ParameterCodec).
		Stream(ctx)
	if err != nil {
		return rv, err
	}
	defer func() { _ = body.Close() }()
	start, events := time.Now(), 0
	dec := json.NewDecoder(body)
	for ; ; events++ {
		var ev metav1.WatchEvent
		if err := dec.Decode(&ev); err != nil {
			if !errors.Is(err, io.EOF) {
				return rv, err
			}
			if events == 0 && time.Since(start) < time.Second {
				// As client-go's reflector: a server that ends every watch at once is
				// not watched again at once.
				return rv, errShortWatch
			}
			return rv, nil
		}
		if watch.EventType(ev.Type) == watch.Error {
			var status metav1.Status
			if err := json.Unmarshal(ev.Object.Raw, &status); err != nil {
				return rv, fmt.Errorf("decoding a watch error: %w", err)
			}
			return rv, apierrors.FromObject(&status)
		}
		var s corev1.Secret
		if err := json.Unmarshal(ev.Object.Raw, &s); err != nil {
			return rv, fmt.Errorf("decoding a watch event: %w", err)
		}
		if s.ResourceVersion != "" {
			rv = s.ResourceVersion
		}
		switch watch.EventType(ev.Type) {
		case watch.Added, watch.Modified, watch.Deleted:
			if err := w.event(&s, watch.EventType(ev.Type) == watch.Deleted); err != nil {
				return rv, err
			}
		}
	}
}

// waitSynced waits for the first sync until ctx is done, and reports whether it came.
func (w *issuedWatch) waitSynced(ctx context.Context) bool {
	select {
	case <-w.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// get returns a copy of the Secret held, or nil.
func (w *issuedWatch) get() *corev1.Secret {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.obj == nil {
		return nil
	}
	return w.obj.DeepCopy()
}

// hold makes s (nil: none) the Secret held, and reports whether that changed it.
func (w *issuedWatch) hold(s *corev1.Secret) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := !equality.Semantic.DeepEqual(w.obj, s)
	w.obj = s
	return changed
}

// secret returns s transformed when it is the Secret watched, nil otherwise.
func (w *issuedWatch) secret(s *corev1.Secret) (*corev1.Secret, error) {
	if s.Namespace != w.key.Namespace || s.Name != w.key.Name {
		return nil, nil
	}
	out, err := w.transform(s)
	if err != nil {
		return nil, err
	}
	s, _ = out.(*corev1.Secret)
	return s, nil
}

// event holds s, or drops it when deleted, if it is the Secret watched.
func (w *issuedWatch) event(s *corev1.Secret, deleted bool) error {
	held, err := w.secret(s)
	if err != nil || held == nil {
		return err
	}
	if deleted {
		held = nil
	}
	if w.hold(held) {
		w.notify()
	}
	return nil
}
