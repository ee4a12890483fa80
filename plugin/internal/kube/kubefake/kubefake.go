// Package kubefake is the kube.Factory of unit tests: clusters held in memory by
// controller-runtime's fake client and client-go's fake dynamic client, one per
// kubeconfig context, so that a verb's Run is tested without API servers.
package kubefake

import (
	gocontext "context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Cluster is the cluster of one context.
type Cluster struct {
	// Context is the kubeconfig context.
	Context string
	// Client is its controller-runtime client; tests read what a verb wrote through it.
	Client client.WithWatch
	// Dynamic is its dynamic client, over objects of its own (seed it with AddDynamic).
	Dynamic *dynamicfake.FakeDynamicClient
	// Kubernetes, when set, is its clientset.
	Kubernetes kubernetes.Interface
	// Discovery, when set, is its discovery client.
	Discovery discovery.DiscoveryInterface
	// Err, when set, is returned by every client of the cluster: an unreachable cluster.
	Err error
	// Options are the ClientOptions of the last client built for it.
	Options kube.ClientOptions
}

// Factory is a kube.Factory over in-memory clusters.
type Factory struct {
	// Current is the kubeconfig's current context.
	Current string
	// Explicit is what ExplicitFile returns.
	Explicit string

	clusters map[string]*Cluster
	order    []string
}

var _ kube.Factory = (*Factory)(nil)

// New returns a Factory with a cluster per context, the first one current, each holding
// objs.
func New(contexts []string, objs ...client.Object) *Factory {
	f := &Factory{clusters: map[string]*Cluster{}}
	for _, c := range contexts {
		f.Add(c, objs...)
	}
	if len(contexts) > 0 {
		f.Current = contexts[0]
	}
	return f
}

// Add adds the cluster of context, holding objs, and returns it.
func (f *Factory) Add(context string, objs ...client.Object) *Cluster {
	return f.AddWithFuncs(context, interceptor.Funcs{}, objs...)
}

// AddWithFuncs is Add with interceptors of the client's calls, to make a cluster fail.
func (f *Factory) AddWithFuncs(context string, funcs interceptor.Funcs, objs ...client.Object) *Cluster {
	scheme := kube.NewScheme()
	if funcs.Apply == nil {
		funcs.Apply = func(ctx gocontext.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return apply(ctx, scheme, c, obj, opts...)
		}
	}
	c := &Cluster{
		Context: context,
		Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
			WithInterceptorFuncs(funcs).Build(),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, ListKinds()),
	}
	if f.clusters == nil {
		f.clusters = map[string]*Cluster{}
	}
	if _, ok := f.clusters[context]; !ok {
		f.order = append(f.order, context)
	}
	f.clusters[context] = c
	return c
}

// Cluster returns the cluster of context, or nil.
func (f *Factory) Cluster(context string) *Cluster { return f.clusters[context] }

// ListKinds maps the registry's resources to their list kinds, for the fake dynamic
// client.
func ListKinds() map[schema.GroupVersionResource]string {
	gv := v1alpha1.GroupVersion
	return map[schema.GroupVersionResource]string{
		gv.WithResource("clusters"):          "ClusterList",
		gv.WithResource("clusterfeatures"):   "ClusterFeatureList",
		gv.WithResource("resourcesyncrules"): "ResourceSyncRuleList",
	}
}

// AddDynamic adds objs to the dynamic client of context.
func (f *Factory) AddDynamic(context string, objs ...runtime.Object) error {
	c := f.clusters[context]
	if c == nil {
		return fmt.Errorf("no cluster %q", context)
	}
	for _, o := range objs {
		if err := c.Dynamic.Tracker().Add(o); err != nil {
			return err
		}
	}
	return nil
}

// RawConfig returns a kubeconfig with a context, cluster and user per cluster.
func (f *Factory) RawConfig() (clientcmdapi.Config, error) {
	raw := clientcmdapi.Config{
		CurrentContext: f.Current,
		Clusters:       map[string]*clientcmdapi.Cluster{},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{},
		Contexts:       map[string]*clientcmdapi.Context{},
	}
	for _, name := range f.order {
		raw.Clusters[name] = &clientcmdapi.Cluster{Server: host(name)}
		raw.AuthInfos[name] = &clientcmdapi.AuthInfo{}
		raw.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	return raw, nil
}

// ExplicitFile returns Explicit.
func (f *Factory) ExplicitFile() string { return f.Explicit }

// Targets resolves the contexts as kube.NewFactory does.
func (f *Factory) Targets(cmd *cobra.Command, contexts []string) ([]kube.Target, error) {
	return kube.Resolve(cmd, f, contexts, func() (*rest.Config, error) {
		name := f.Current
		if cmd != nil {
			if fl := cmd.Flag("context"); fl != nil && fl.Value.String() != "" {
				name = fl.Value.String()
			}
		}
		if name == "" {
			return &rest.Config{Host: "http://localhost:8080"}, nil
		}
		return &rest.Config{Host: host(name)}, nil
	})
}

// Target returns the target of a context.
func (f *Factory) Target(context string) (kube.Target, error) {
	if _, ok := f.clusters[context]; !ok {
		return kube.Target{}, fmt.Errorf("loading the kubeconfig of context %s: context was not found", context)
	}
	return kube.Target{Name: context, Context: context, Config: &rest.Config{Host: host(context)}}, nil
}

// cluster returns the cluster of t and records o. A target without a context (a REST
// config of its own, such as a reader kubeconfig) reaches the cluster whose server its
// config names, else the current context's.
func (f *Factory) cluster(t kube.Target, o kube.ClientOptions) (*Cluster, error) {
	name := t.Context
	if name == "" && t.Config != nil {
		for _, c := range f.order {
			if host(c) == t.Config.Host {
				name = c
			}
		}
	}
	if name == "" {
		name = f.Current
	}
	c := f.clusters[name]
	if c == nil {
		return nil, fmt.Errorf("no cluster for context %q (have %v)", name, slices.Clone(f.order))
	}
	c.Options = o
	if c.Err != nil {
		return nil, c.Err
	}
	return c, nil
}

// Client returns the cluster's controller-runtime client.
func (f *Factory) Client(t kube.Target, o kube.ClientOptions) (client.Client, error) {
	c, err := f.cluster(t, o)
	if err != nil {
		return nil, err
	}
	return c.Client, nil
}

// Dynamic returns the cluster's dynamic client.
func (f *Factory) Dynamic(t kube.Target, o kube.ClientOptions) (dynamic.Interface, error) {
	c, err := f.cluster(t, o)
	if err != nil {
		return nil, err
	}
	return c.Dynamic, nil
}

// Kubernetes returns the cluster's clientset, or an error when the test set none.
func (f *Factory) Kubernetes(t kube.Target, o kube.ClientOptions) (kubernetes.Interface, error) {
	c, err := f.cluster(t, o)
	if err != nil {
		return nil, err
	}
	if c.Kubernetes == nil {
		return nil, fmt.Errorf("kubefake: no clientset for context %q", c.Context)
	}
	return c.Kubernetes, nil
}

// apply is a server-side apply that behaves as an API server's where the fake client's
// does not: an apply that changes nothing keeps the object (and its resourceVersion), and
// a dry run returns the object as it would be. It applies to a scratch copy of the
// object first to learn the result.
func apply(ctx gocontext.Context, scheme *runtime.Scheme, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("kubefake: marshalling the apply configuration: %w", err)
	}
	req := &unstructured.Unstructured{}
	if err := req.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("kubefake: %w", err)
	}
	before := &unstructured.Unstructured{}
	before.SetGroupVersionKind(req.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(req), before); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		before = nil
	}
	ao := &client.ApplyOptions{}
	ao.ApplyOptions(opts)
	dryRun := slices.Contains(ao.DryRun, metav1.DryRunAll)
	if before == nil && !dryRun {
		return c.Apply(ctx, obj, opts...)
	}
	scratch := fake.NewClientBuilder().WithScheme(scheme)
	if before != nil {
		scratch = scratch.WithObjects(before.DeepCopy())
	}
	result := req.DeepCopy()
	var real []client.ApplyOption
	for _, o := range opts {
		if o != client.DryRunAll {
			real = append(real, o)
		}
	}
	if err := scratch.Build().Apply(ctx, client.ApplyConfigurationFromUnstructured(result), real...); err != nil {
		return err
	}
	switch {
	case before != nil && same(before, result):
		return into(before, obj)
	case dryRun:
		if before != nil {
			result.SetResourceVersion(before.GetResourceVersion())
		}
		return into(result, obj)
	default:
		return c.Apply(ctx, obj, opts...)
	}
}

// same compares two versions of an object without their bookkeeping.
func same(a, b *unstructured.Unstructured) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, u := range []*unstructured.Unstructured{a, b} {
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
	}
	return equality.Semantic.DeepEqual(a.Object, b.Object)
}

// into writes u into the apply configuration obj, as the client does with an answer.
func into(u *unstructured.Unstructured, obj runtime.ApplyConfiguration) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return fmt.Errorf("kubefake: %w", err)
	}
	return nil
}

// Discovery returns the cluster's discovery client, or an error when the test set none.
func (f *Factory) Discovery(t kube.Target, o kube.ClientOptions) (discovery.DiscoveryInterface, error) {
	c, err := f.cluster(t, o)
	if err != nil {
		return nil, err
	}
	if c.Discovery == nil {
		return nil, fmt.Errorf("kubefake: no discovery client for context %q", c.Context)
	}
	return c.Discovery, nil
}

func host(context string) string { return "https://" + context + ".example:6443" }

// Host returns the server of context in the kubeconfig of the Factory: a REST config
// with it (a reader kubeconfig in a test's Secret) reaches that context's cluster.
func Host(context string) string { return host(context) }
