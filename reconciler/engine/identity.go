package engine

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// What a member may write here is this cluster's RBAC, not the engine's word: everything
// that comes from a member (a copy of its object, the copy's status, the namespace the
// copy needs, the delete of a copy whose original it no longer has, the status its copy
// brings back to an original made here) is written impersonating the member's identity,
// v1alpha1.MemberUser in the group v1alpha1.MembersGroup, so the API server authorizes
// each write against the RoleBindings the cluster's admin gave that identity or the
// group. The controller itself needs no more than the right to impersonate them. The
// built-in rule's copies (the ResourceSyncRules) are the controller's own objects,
// written as itself; so is the delete of a copy whose origin is no longer a member.

// writer writes in the local cluster as one identity.
type writer struct {
	// user is the impersonated user; empty for the controller's own identity.
	user string
	dyn  dynamic.Interface
	// rest writes copies (writeCopy); nil without Options.Config (the fakes of unit
	// tests), when dyn writes them.
	rest rest.Interface
}

// resource returns the dynamic client of the objects of mapping m in namespace ns.
func (w *writer) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return w.dyn.Resource(m.Resource).Namespace(ns)
	}
	return w.dyn.Resource(m.Resource)
}

// writers holds the writer of each identity, made when first needed: they share the
// local cluster's transport (its connections), each adding its impersonation headers.
type writers struct {
	mu sync.Mutex
	by map[string]*writer
}

// self is the controller's own writer.
func (e *Engine) self() *writer {
	return &writer{dyn: e.opts.Dynamic, rest: e.writes}
}

// as returns the writer of the member whose Cluster is named member here.
func (e *Engine) as(member string) (*writer, error) {
	user := v1alpha1.MemberUser(e.opts.Namespace, member)
	e.writers.mu.Lock()
	defer e.writers.mu.Unlock()
	if w, ok := e.writers.by[user]; ok {
		return w, nil
	}
	w := &writer{user: user, dyn: e.opts.Dynamic, rest: e.writes}
	if e.opts.Config != nil && e.opts.HTTPClient != nil {
		base := e.opts.HTTPClient
		hc := &http.Client{
			Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
				UserName: user, Groups: []string{v1alpha1.MembersGroup},
			}, base.Transport),
			Timeout:       base.Timeout,
			CheckRedirect: base.CheckRedirect,
		}
		dyn, err := dynamic.NewForConfigAndClient(e.opts.Config, hc)
		if err != nil {
			return nil, fmt.Errorf("a client of the local cluster as %s: %w", user, err)
		}
		rc, err := clusterClient{cfg: e.opts.Config, hc: hc}.restClient(schema.GroupVersionKind{})
		if err != nil {
			return nil, fmt.Errorf("a REST client of the local cluster as %s: %w", user, err)
		}
		w.dyn, w.rest = dyn, rc
	}
	if e.writers.by == nil {
		e.writers.by = map[string]*writer{}
	}
	e.writers.by[user] = w
	return w, nil
}

// writerOf returns the writer of what comes from origin (a member's cluster ID) through
// rule: the member's identity, or the controller's own for the built-in rule and for a
// delete of a copy whose origin is no longer a member (del).
func (e *Engine) writerOf(policy planner.Policy, origin types.UID, rule string, del bool) (*writer, error) {
	if rule == v1alpha1.CoreRuleName {
		return e.self(), nil
	}
	name, ok := policy.MemberName(origin)
	if !ok {
		if del {
			return e.self(), nil
		}
		return nil, fmt.Errorf("the origin %q of the copy is not a member of this cluster's group", origin)
	}
	return e.as(name)
}
