// Package v1alpha1 holds the API of kubectl-registry: the Cluster, ClusterFeature and
// ResourceSyncRule custom resources of group clusterregistry.k8s.cisco.com, drop-in
// compatible with the cluster-registry-controller API of the same group and version,
// and every well-known string (labels, annotations, Secret type, condition types and
// reasons) the controller and the plugin share.
//
// +kubebuilder:object:generate=true
// +groupName=clusterregistry.k8s.cisco.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "clusterregistry.k8s.cisco.com", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &Builder{}

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Builder collects the kinds of this package (each *_types.go file registers its own in
// init) and adds them to a runtime.Scheme. It is built on apimachinery's
// runtime.SchemeBuilder rather than controller-runtime's scheme.Builder so that the API,
// and the pure planners that import it, link no controller runtime.
//
// +kubebuilder:object:generate=false
type Builder struct{ funcs runtime.SchemeBuilder }

// Register adds kinds of this package's GroupVersion to the builder.
func (b *Builder) Register(kinds ...runtime.Object) {
	b.funcs.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, kinds...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}

// AddToScheme adds every kind registered so far to s.
func (b *Builder) AddToScheme(s *runtime.Scheme) error { return b.funcs.AddToScheme(s) }

// Resource returns the GroupResource of a resource of this group, e.g. "clusters".
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

// NewScheme returns a new scheme holding this package's kinds only; callers add the
// built-in kinds they need with their own AddToScheme calls.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
