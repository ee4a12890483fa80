package get

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// tableAccept asks for server-side printing, like kubectl get, with JSON as fallback.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// pageSize is the chunk size of each list request (the whole list is read).
const pageSize = 500

var clustersGVR = v1alpha1.GroupVersion.WithResource("clusters")

// clusterResult is what one context returned.
type clusterResult struct {
	context string
	cluster string // registry Cluster name, or the context name
	uid     types.UID
	// skip: not part of the search (registry not installed by default, filtered out,
	// or a duplicate of another context).
	skip     bool
	warnings []string
	err      error
	// tables holds one entry per requested resource, nil where the cluster does not
	// serve the resource type.
	tables []*resourceTable
	// conn is how the cluster was reached (nil when it could not be).
	conn *clusterConn
}

// resourceTable is one resource type as one cluster printed it.
type resourceTable struct {
	mapping *meta.RESTMapping
	columns []metav1.TableColumnDefinition
	rows    []tableRow
}

// tableRow is a row of a server-side Table with its object.
type tableRow struct {
	cells []any
	obj   *unstructured.Unstructured
}

// clusterConn holds the clients of one context.
type clusterConn struct {
	// target is the context's cluster, for the clients of --watch.
	target    kube.Target
	kube      kubernetes.Interface
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
}

// query runs both phases against every target in parallel: identify the clusters, then,
// after filtering and de-duplication, list the resources.
func (o *Options) query(ctx context.Context) []*clusterResult {
	results := make([]*clusterResult, len(o.targets))
	conns := make([]*clusterConn, len(o.targets))
	ctxs := make([]context.Context, len(o.targets))
	for i, t := range o.targets {
		results[i] = &clusterResult{context: t.context, cluster: t.context}
		c, cancel := context.WithTimeout(ctx, o.ClusterTimeout)
		defer cancel()
		ctxs[i] = c
	}
	parallel(len(o.targets), func(i int) {
		conn, err := o.connect(o.targets[i])
		if err != nil {
			results[i].err = err
			return
		}
		conns[i] = conn
		results[i].conn = conn
		o.identify(ctxs[i], conn, results[i])
	})

	keep := map[string]bool{}
	for _, c := range o.Clusters {
		keep[c] = true
	}
	seenUID := map[types.UID]string{}
	for _, r := range results {
		if r.err != nil || r.skip {
			continue
		}
		if len(keep) > 0 && !keep[r.cluster] {
			r.skip = true
			continue
		}
		if other, dup := seenUID[r.uid]; dup {
			r.skip = true
			r.warnings = append(r.warnings, fmt.Sprintf("context %s reaches the same cluster as context %s: searched once", r.context, other))
			continue
		}
		seenUID[r.uid] = r.context
	}
	parallel(len(o.targets), func(i int) {
		r := results[i]
		if r.err != nil || r.skip {
			return
		}
		r.err = o.list(ctxs[i], conns[i], o.targets[i], r)
	})
	return results
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func (o *Options) connect(t target) (*clusterConn, error) {
	kt, err := o.Factory.Target(t.context)
	if err != nil {
		return nil, err
	}
	// --cluster-timeout bounds each cluster; warnings would repeat for every cluster.
	opts := kube.ClientOptions{Verb: "get", Timeout: o.ClusterTimeout, Warnings: io.Discard}
	kc, err := o.Factory.Kubernetes(kt, opts)
	if err != nil {
		return nil, err
	}
	dyn, err := o.Factory.Dynamic(kt, opts)
	if err != nil {
		return nil, err
	}
	dc, err := o.Factory.Discovery(kt, opts)
	if err != nil {
		return nil, err
	}
	return &clusterConn{target: kt, kube: kc, dynamic: dyn, discovery: dc}, nil
}

// identify names the cluster of r's context after its local registry Cluster CR.
func (o *Options) identify(ctx context.Context, conn *clusterConn, r *clusterResult) {
	ns, err := conn.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		r.err = fmt.Errorf("reading the kube-system namespace: %w", err)
		return
	}
	r.uid = ns.UID
	list, err := conn.dynamic.Resource(clustersGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		if !o.explicitCtx {
			r.skip = true // the registry is not installed: not part of the group
			return
		}
		r.warnings = append(r.warnings, fmt.Sprintf("context %s: the cluster registry is not installed there; showing it as cluster %q", r.context, r.context))
		return
	case err != nil:
		r.err = fmt.Errorf("listing registry Clusters: %w", err)
		return
	}
	for _, item := range list.Items {
		typ, _, _ := unstructured.NestedString(item.Object, "status", "type")
		id, _, _ := unstructured.NestedString(item.Object, "spec", "clusterID")
		if typ == string(v1alpha1.ClusterTypeLocal) && types.UID(id) == ns.UID {
			r.cluster = item.GetName()
			return
		}
	}
	r.warnings = append(r.warnings, fmt.Sprintf("context %s: no local registry Cluster has clusterID %s (its kube-system UID); showing it as cluster %q", r.context, ns.UID, r.context))
}

// list reads every requested resource type from one cluster as server-side Tables.
func (o *Options) list(ctx context.Context, conn *clusterConn, t target, r *clusterResult) error {
	dc := conn.discovery
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil && len(groups) == 0 {
		return fmt.Errorf("discovering resource types: %w", err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDiscoveryRESTMapper(groups), dc, nil)
	r.tables = make([]*resourceTable, len(o.resources))
	for i, res := range o.resources {
		mapping, err := mappingFor(mapper, res)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return err
		}
		table, err := o.listTable(ctx, conn, t, mapping)
		if err != nil {
			return err
		}
		r.tables[i] = table
	}
	return nil
}

// mappingFor resolves a resource argument ("cm", "deployments.apps", "jobs.v1.batch")
// like kubectl does.
func mappingFor(mapper meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	gvr, gr := schema.ParseResourceArg(arg)
	var full schema.GroupVersionResource
	var err error
	if gvr != nil {
		full, err = mapper.ResourceFor(*gvr)
	}
	if gvr == nil || err != nil {
		full, err = mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil, err
	}
	gvk, err := mapper.KindFor(full)
	if err != nil {
		return nil, err
	}
	return mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
}

func (o *Options) listTable(ctx context.Context, conn *clusterConn, t target, mapping *meta.RESTMapping) (*resourceTable, error) {
	gv := mapping.Resource.GroupVersion()
	segments := []string{"/apis", gv.Group, gv.Version}
	if gv.Group == "" {
		segments = []string{"/api", gv.Version}
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && !o.AllNamespaces {
		segments = append(segments, "namespaces", t.namespace)
	}
	segments = append(segments, mapping.Resource.Resource)
	absPath := path.Join(segments...)

	out := &resourceTable{mapping: mapping}
	cont := ""
	for {
		req := conn.kube.CoreV1().RESTClient().Get().AbsPath(absPath).
			SetHeader("Accept", tableAccept).
			Param("includeObject", "Object").
			Param("limit", strconv.Itoa(pageSize))
		if o.LabelSelector != "" {
			req = req.Param("labelSelector", o.LabelSelector)
		}
		if o.FieldSelector != "" {
			req = req.Param("fieldSelector", o.FieldSelector)
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		raw, err := req.DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", mapping.Resource.GroupResource(), err)
		}
		table := &metav1.Table{}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(table); err != nil {
			return nil, fmt.Errorf("decoding the %s table: %w", mapping.Resource.GroupResource(), err)
		}
		if table.Kind != "Table" {
			return nil, fmt.Errorf("listing %s: the server returned a %s, not a Table", mapping.Resource.GroupResource(), table.Kind)
		}
		if out.columns == nil {
			out.columns = table.ColumnDefinitions
		}
		for _, row := range table.Rows {
			obj := &unstructured.Unstructured{}
			if len(row.Object.Raw) > 0 {
				if err := json.Unmarshal(row.Object.Raw, &obj.Object); err != nil {
					return nil, fmt.Errorf("decoding a %s: %w", mapping.Resource.GroupResource(), err)
				}
			}
			if obj.Object == nil {
				obj.Object = map[string]any{}
			}
			if obj.GetKind() == "" {
				obj.SetGroupVersionKind(mapping.GroupVersionKind)
			}
			if len(o.names) > 0 && !containsString(o.names, obj.GetName()) {
				continue
			}
			out.rows = append(out.rows, tableRow{cells: row.Cells, obj: obj})
		}
		cont = table.Continue
		if cont == "" {
			return out, nil
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
