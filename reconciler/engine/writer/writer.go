// Package writer is the engine's write side: what executes a planned action against the
// local cluster. It holds the local cluster's clients per identity (the controller's own,
// and each member's, impersonated: identity.go), the REST mappings of the kinds written,
// the write of a copy through the REST client, and the namespace a copy needs; and what
// the engine remembers of its writes (records.go: the write records Settle reads, and the
// own writes the local cache has not seen yet).
//
// The engine decides (package planner) and records the outcomes on its rules; the writer
// decides nothing: it writes what it is given, as whom it is told.
package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// Target is the local object a write is of.
type Target struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
}

func (t Target) String() string {
	if t.Namespace == "" {
		return t.GVK.Kind + " " + t.Name
	}
	return t.GVK.Kind + " " + t.Namespace + "/" + t.Name
}

// Answer is what the REST client decodes the API server's answer to a write into, and
// gives the object stored.
type Answer interface {
	runtime.Object
	Object(gvk schema.GroupVersionKind) (*unstructured.Unstructured, error)
}

// Options configure a Writer.
type Options struct {
	// Namespace is the registry namespace, which names the members' identities.
	Namespace string
	// Dynamic is the controller's own dynamic client of the local cluster.
	Dynamic dynamic.Interface
	// Config and HTTPClient are the local cluster's REST config and HTTP client. Without
	// a Config (the fakes of unit tests), Dynamic writes everything, as every identity.
	Config     *rest.Config
	HTTPClient *http.Client
	// RESTClient returns a REST client of the local cluster that sends its requests
	// through hc and decodes its answers into the Answers of NewAnswer; used with a
	// Config only.
	RESTClient func(hc *http.Client) (rest.Interface, error)
	NewAnswer  func() Answer
	// Mapper resolves kinds in the local cluster.
	Mapper meta.RESTMapper
	// Reader reads the local namespaces (EnsureNamespace).
	Reader client.Reader
}

// Writer writes in the local cluster.
type Writer struct {
	opts Options
	// rest is the controller's own REST client; nil without Options.Config.
	rest rest.Interface

	mu sync.Mutex
	by map[Identity]*clients

	// mappings are the local REST mappings of the kinds written (Mapping).
	mappingMu sync.Mutex
	mappings  map[schema.GroupVersionKind]*meta.RESTMapping
}

// New returns a Writer of the local cluster.
func New(opts Options) (*Writer, error) {
	w := &Writer{opts: opts}
	if opts.Config != nil {
		rc, err := opts.RESTClient(opts.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("the local cluster's REST client: %w", err)
		}
		w.rest = rc
	}
	return w, nil
}

// Mapping returns the local REST mapping of gvk. A mapping is kept until ForgetMappings
// (the engine forgets them at a refresh, when the rules or the peers changed, and after a
// failed write of the kind, which may no longer be served as it was): every write needs
// one, and the RESTMapper's lookup costs as much as a small reconcile.
func (w *Writer) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	w.mappingMu.Lock()
	defer w.mappingMu.Unlock()
	if m, ok := w.mappings[gvk]; ok {
		return m, nil
	}
	m, err := w.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if w.mappings == nil {
		w.mappings = map[schema.GroupVersionKind]*meta.RESTMapping{}
	}
	w.mappings[gvk] = m
	return m, nil
}

// ForgetMappings drops the kept REST mappings: every one (a refresh), or those of the
// kinds given.
func (w *Writer) ForgetMappings(gvks ...schema.GroupVersionKind) {
	w.mappingMu.Lock()
	defer w.mappingMu.Unlock()
	if len(gvks) == 0 {
		w.mappings = nil
	}
	for _, gvk := range gvks {
		delete(w.mappings, gvk)
	}
}

// Client returns the dynamic client, as identity as, of the objects of kind gvk in
// namespace ns.
func (w *Writer) Client(as Identity, gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	m, err := w.Mapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("kind %s is not served by the local cluster: %w", gvk, err)
	}
	return w.Resource(as, m, ns)
}

// Resource returns the dynamic client, as identity as, of the objects of mapping m in
// namespace ns.
func (w *Writer) Resource(as Identity, m *meta.RESTMapping, ns string) (dynamic.ResourceInterface, error) {
	c, err := w.clients(as)
	if err != nil {
		return nil, err
	}
	return c.resource(m, ns), nil
}

// Write creates obj, the copy t, or updates it, as identity as, and returns the object
// stored. With a REST client of the local cluster (Options.Config), the API server's
// answer is decoded as the informers decode objects (an Answer, without managedFields,
// which no caller reads): the dynamic client's JSON serializer unmarshals the whole
// answer twice, once to read its kind, and was a tenth of a peer controller's CPU in a
// burst. Without one (the fakes of unit tests), the dynamic client writes.
func (w *Writer) Write(ctx context.Context, as Identity, t Target, obj *unstructured.Unstructured, update bool) (*unstructured.Unstructured, error) {
	c, err := w.clients(as)
	if err != nil {
		return nil, err
	}
	m, err := w.Mapping(t.GVK)
	if err != nil {
		return nil, fmt.Errorf("kind %s is not served by the local cluster: %w", t.GVK, err)
	}
	if c.rest == nil {
		ri := c.resource(m, t.Namespace)
		if update {
			return ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		}
		return ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	}
	body, err := json.Marshal(obj.Object) // as the dynamic client encodes it
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", t, err)
	}
	path := ResourcePath(m, t.Namespace)
	var req *rest.Request
	if update {
		req = c.rest.Put().AbsPath(append(path, t.Name)...).SpecificallyVersionedParams(&metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	} else {
		req = c.rest.Post().AbsPath(path...).SpecificallyVersionedParams(&metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	}
	stored := w.opts.NewAnswer()
	if err := req.Body(body).Do(ctx).Into(stored); err != nil {
		return nil, err
	}
	return stored.Object(t.GVK)
}

// ResourcePath is the path of the objects of a resource in namespace ("" for all
// namespaces or a cluster-scoped kind): what the engine reads a peer at, and writes at.
func ResourcePath(mapping *meta.RESTMapping, namespace string) []string {
	path := []string{"api"}
	if g := mapping.Resource.Group; g != "" {
		path = []string{"apis", g}
	}
	path = append(path, mapping.Resource.Version)
	if namespace != "" && mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		path = append(path, "namespaces", namespace)
	}
	return append(path, mapping.Resource.Resource)
}

// EnsureNamespace creates namespace ns of a copy, as identity as, when it is missing and
// a rule creates namespaces: createdBy names it ("" for none, and a missing namespace is
// then planner.ErrNamespaceMissing).
func (w *Writer) EnsureNamespace(ctx context.Context, as Identity, ns, createdBy string) error {
	if ns == "" {
		return nil
	}
	var got corev1.Namespace
	err := w.opts.Reader.Get(ctx, client.ObjectKey{Name: ns}, &got)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	if createdBy == "" {
		return fmt.Errorf("%w: %s: create it, or set spec.createNamespaces on the rule", planner.ErrNamespaceMissing, ns)
	}
	created := &unstructured.Unstructured{}
	created.SetAPIVersion("v1")
	created.SetKind("Namespace")
	created.SetName(ns)
	created.SetAnnotations(map[string]string{v1alpha1.CreatedByAnnotation: createdBy})
	// As the member the copy comes from: whether a member may make namespaces here is
	// this cluster's RBAC's to say.
	c, err := w.clients(as)
	if err != nil {
		return err
	}
	nsr := c.dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if _, err := nsr.Create(ctx, created, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}
