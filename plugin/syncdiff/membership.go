package syncdiff

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner/members"
)

var (
	secretGVK  = corev1.SchemeGroupVersion.WithKind("Secret")
	clusterGVK = v1alpha1.GroupVersion.WithKind("Cluster")
)

// secrets returns the Secrets of the cluster in namespace.
func (v *view) secrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	l := v.objects(ctx, secretGVK, namespace)
	if l.err != nil {
		return nil, l.err
	}
	var out []corev1.Secret
	for i := range l.objs {
		o := &l.objs[i]
		if o.GetNamespace() != namespace {
			continue // a list of every namespace
		}
		var s corev1.Secret
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s); err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s in context %s: %w", namespace, o.GetName(), v.Context, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// isPeer reports whether the local controller runs c as a peer, as its Cluster
// reconciler decides: not disabled, with a reader Secret of the right type, holding a
// kubeconfig, in the registry namespace. Others are neither read nor counted unreachable.
func isPeer(c *v1alpha1.Cluster, localSecrets map[string]*corev1.Secret, namespace string) bool {
	if c.Disabled() {
		return false
	}
	ref := c.Spec.AuthInfo.SecretRef
	if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != namespace) {
		return false
	}
	s := localSecrets[ref.Name]
	return s != nil && s.Type == v1alpha1.SecretTypeClusterRegistry && len(s.Data[v1alpha1.KubeconfigKey]) > 0
}

// membershipInput builds the input the local cluster's membership reconciler gives
// members.Plan: the local Clusters and registry-namespace Secrets, and the view of
// every peer, read through the context that maps to its cluster ID. A peer no context
// reads is counted unreachable (and the rule plan already warns about it).
func (p *differ) membershipInput(ctx context.Context, namespace string, res *result) (members.Input, bool) {
	in := members.Input{LocalID: p.local.ID, Namespace: namespace, Now: time.Now()}
	if c := p.local.localCluster(); c != nil {
		in.LocalName = c.Name
	}
	in.Local.Clusters = append([]v1alpha1.Cluster(nil), p.local.Clusters...)
	secrets, err := p.local.secrets(ctx, namespace)
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: membership: %v", p.local.Name(), err))
		return in, false
	}
	in.Local.Secrets = secrets
	byName := map[string]*corev1.Secret{}
	for i := range secrets {
		byName[secrets[i].Name] = &secrets[i]
	}
	for i := range p.local.Clusters {
		c := &p.local.Clusters[i]
		if c.Spec.ClusterID == p.local.ID || !isPeer(c, byName, namespace) {
			continue
		}
		v := p.byID[c.Spec.ClusterID]
		if v == nil || v.Err != nil || !v.Installed {
			in.Unreachable = append(in.Unreachable, c.Spec.ClusterID)
			continue
		}
		peerSecrets, err := v.secrets(ctx, namespace)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: membership: its peer %s: %v", p.local.Name(), c.Name, err))
			in.Unreachable = append(in.Unreachable, c.Spec.ClusterID)
			continue
		}
		in.Peers = append(in.Peers, members.View{Name: c.Name, ClusterID: c.Spec.ClusterID, Clusters: v.Clusters, Secrets: peerSecrets})
	}
	return in, true
}

// conflictRef finds the object a conflict of members.Plan is about, from the start of
// its message; empty when the message names none.
var conflictRef = []*regexp.Regexp{
	regexp.MustCompile(`^(Cluster) (\S+?)[;:,]? `),
	regexp.MustCompile(`^(Secret) (\S+?)/(\S+?)[;:,]? `),
	regexp.MustCompile(`^peer \S+ has (Cluster) (\S+) `),
}

type objKey struct {
	kind, namespace, name string
}

// membership plans the membership sync of the local cluster with members.Plan, the
// function its controller runs: every write (create, update, replace, delete, or any
// other op the differ has) and every conflict, and the Clusters and reader Secrets it
// leaves unchanged.
func (p *differ) membership(ctx context.Context, namespace string, scheme *runtime.Scheme) result {
	var res result
	in, ok := p.membershipInput(ctx, namespace, &res)
	if !ok {
		return res
	}
	plan := members.Plan(in)
	p.afterMembership = clustersAfter(p.local.Clusters, plan.Writes)
	touched := map[objKey]bool{}
	for _, w := range plan.Writes {
		it, err := p.membershipWrite(ctx, w, scheme)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("cluster %s: membership: %v", p.local.Name(), err))
			continue
		}
		touched[objKey{it.Kind, it.Namespace, it.Name}] = true
		res.Items = append(res.Items, it)
	}
	// What the controller refuses to trust is shown like a conflict: nothing is written.
	for _, c := range append(slices.Clone(plan.Conflicts), plan.Refused...) {
		it := Item{Cluster: p.local.Name(), Context: p.local.Context, Membership: true, Action: string(planner.ActionConflict), Reason: c}
		for _, re := range conflictRef {
			m := re.FindStringSubmatch(c)
			if m == nil {
				continue
			}
			it.Kind = m[1]
			if it.Kind == "Cluster" {
				it.APIVersion, it.Name = clusterGVK.GroupVersion().String(), m[2]
			} else {
				it.APIVersion, it.Namespace, it.Name = secretGVK.GroupVersion().String(), m[2], m[3]
			}
			break
		}
		touched[objKey{it.Kind, it.Namespace, it.Name}] = true
		res.Items = append(res.Items, it)
	}

	// Unchanged: the Clusters, and the Secrets they reference in the registry namespace.
	var unchanged []Item
	for _, c := range p.local.Clusters {
		if !touched[objKey{"Cluster", "", c.Name}] {
			unchanged = append(unchanged, p.membershipItem(clusterGVK, "", c.Name))
		}
		ref := c.Spec.AuthInfo.SecretRef
		if ref.Name == "" || (ref.Namespace != "" && ref.Namespace != namespace) {
			continue
		}
		k := objKey{"Secret", namespace, ref.Name}
		if touched[k] {
			continue
		}
		if s, ok := p.local.lookup(ctx, secretGVK, namespace, ref.Name); ok && s != nil {
			touched[k] = true
			unchanged = append(unchanged, p.membershipItem(secretGVK, namespace, ref.Name))
		}
	}
	sort.SliceStable(unchanged, func(i, j int) bool { return objectPath(unchanged[i]) < objectPath(unchanged[j]) })
	res.Items = append(res.Items, unchanged...)
	return res
}

func (p *differ) membershipItem(gvk schema.GroupVersionKind, namespace, name string) Item {
	return Item{Cluster: p.local.Name(), Context: p.local.Context, Membership: true, Action: string(planner.ActionNone),
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: namespace, Name: name}
}

// membershipWrite turns a write of members.Plan into a plan item. The op is kept as
// it is: a delete shows as a deletion, every other op as a diff of the live object
// against the written one.
func (p *differ) membershipWrite(ctx context.Context, w members.Write, scheme *runtime.Scheme) (Item, error) {
	key := types.NamespacedName{Namespace: w.Object.GetNamespace(), Name: w.Object.GetName()}
	gvks, _, err := scheme.ObjectKinds(w.Object)
	if err != nil {
		return Item{}, fmt.Errorf("%s %s: %w", w.Op, key, err)
	}
	gvk := gvks[0]
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.Object)
	if err != nil {
		return Item{}, fmt.Errorf("%s %s %s: %w", w.Op, gvk.Kind, key, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	it := p.membershipItem(gvk, u.GetNamespace(), u.GetName())
	it.Action, it.From, it.Origin = string(w.Op), w.From, w.Describes
	live, ok := p.local.lookup(ctx, gvk, u.GetNamespace(), u.GetName())
	if ok {
		it.live = live
	}
	if it.Action != string(planner.ActionDelete) {
		it.Object = u
	}
	if it.Origin == "" {
		it.Origin = types.UID(u.GetAnnotations()[v1alpha1.OwnershipAnnotation])
	}
	return it, nil
}

// clustersAfter returns the Clusters once the membership writes are made: a Cluster
// created, updated or replaced by a write is the written one, a deleted one is gone.
func clustersAfter(clusters []v1alpha1.Cluster, writes []members.Write) []v1alpha1.Cluster {
	out := append([]v1alpha1.Cluster{}, clusters...)
	for _, w := range writes {
		c, ok := w.Object.(*v1alpha1.Cluster)
		if !ok {
			continue
		}
		i := slices.IndexFunc(out, func(o v1alpha1.Cluster) bool { return o.Name == c.Name })
		switch {
		case w.Op == members.OpDelete && i >= 0:
			out = slices.Delete(out, i, i+1)
		case w.Op == members.OpDelete:
		case i >= 0:
			out[i] = *c.DeepCopy()
		default:
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}
