package writer

import (
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
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

// Identity is who a write is made as: the impersonated user, or Self.
type Identity string

// Self is the controller's own identity.
const Self Identity = ""

// clients write in the local cluster as one identity.
type clients struct {
	dyn dynamic.Interface
	// rest writes copies (Write); nil without Options.Config (the fakes of unit tests),
	// when dyn writes them.
	rest rest.Interface
}

// resource returns the dynamic client of the objects of mapping m in namespace ns.
func (c *clients) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(ns)
	}
	return c.dyn.Resource(m.Resource)
}

// clients returns the clients of identity as, made when first needed: they share the
// local cluster's transport (its connections), each adding its impersonation headers.
func (w *Writer) clients(as Identity) (*clients, error) {
	if as == Self {
		return &clients{dyn: w.opts.Dynamic, rest: w.rest}, nil
	}
	user := string(as)
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.by[as]; ok {
		return c, nil
	}
	c := &clients{dyn: w.opts.Dynamic, rest: w.rest}
	if w.opts.Config != nil && w.opts.HTTPClient != nil {
		base := w.opts.HTTPClient
		hc := &http.Client{
			Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
				UserName: user, Groups: []string{v1alpha1.MembersGroup},
			}, base.Transport),
			Timeout:       base.Timeout,
			CheckRedirect: base.CheckRedirect,
		}
		dyn, err := dynamic.NewForConfigAndClient(w.opts.Config, hc)
		if err != nil {
			return nil, fmt.Errorf("a client of the local cluster as %s: %w", user, err)
		}
		rc, err := w.opts.RESTClient(hc)
		if err != nil {
			return nil, fmt.Errorf("a REST client of the local cluster as %s: %w", user, err)
		}
		c.dyn, c.rest = dyn, rc
	}
	if w.by == nil {
		w.by = map[Identity]*clients{}
	}
	w.by[as] = c
	return c, nil
}

// Of returns the identity that writes what comes from origin (a member's cluster ID)
// through rule: the member's, or the controller's own (Self) for the built-in rule and
// for a delete of a copy whose origin is no longer a member (del).
func (w *Writer) Of(policy planner.Policy, origin types.UID, rule string, del bool) (Identity, error) {
	if rule == v1alpha1.CoreRuleName {
		return Self, nil
	}
	name, ok := policy.MemberName(origin)
	if !ok {
		if del {
			return Self, nil
		}
		return Self, fmt.Errorf("the origin %q of the copy is not a member of this cluster's group", origin)
	}
	as := Identity(v1alpha1.MemberUser(w.opts.Namespace, name))
	if _, err := w.clients(as); err != nil {
		return Self, err
	}
	return as, nil
}
