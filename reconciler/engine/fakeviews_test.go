package engine

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeViews are views of the clusters whose informers have all synced: objs holds, per
// cluster ("" for the local one) and kind, the objects they hold; a cluster and kind
// without an entry has no informer. keyWatches is what KeyWatches says of every kind.
// A method the fake does not implement panics (the nil clusterViews): a test that calls
// it expects views the fake does not give.
type fakeViews struct {
	clusterViews
	objs       map[fakeView][]*unstructured.Unstructured
	keyWatches int
}

// fakeView names the informers of a kind in a cluster.
type fakeView struct {
	cluster string
	gvk     schema.GroupVersionKind
}

// hold adds objs to the synced informers of the kind in the cluster, as decoding a cached
// object gives them: with the kind's apiVersion and kind when they have none.
func (f *fakeViews) hold(cluster string, gvk schema.GroupVersionKind, objs ...*unstructured.Unstructured) {
	if f.objs == nil {
		f.objs = map[fakeView][]*unstructured.Unstructured{}
	}
	v := fakeView{cluster: cluster, gvk: gvk}
	held := f.objs[v]
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() == "" {
			o.SetGroupVersionKind(gvk)
		}
		held = append(held, o)
	}
	f.objs[v] = held // an entry even without objects: a synced informer holding none
}

func (f *fakeViews) Lookup(cluster string, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool, error) {
	objs, ok := f.objs[fakeView{cluster: cluster, gvk: gvk}]
	if !ok {
		return nil, false, nil
	}
	for _, o := range objs {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o.DeepCopy(), true, nil
		}
	}
	return nil, true, nil
}

func (f *fakeViews) Covers(cluster string, gvk schema.GroupVersionKind, _ string) bool {
	_, ok := f.objs[fakeView{cluster: cluster, gvk: gvk}]
	return ok
}

func (f *fakeViews) KeyWatches(schema.GroupVersionKind) int { return f.keyWatches }
