// Package install implements "kubectl registry install": it applies the registry's CRDs,
// Namespace, RBAC, metrics Service, NetworkPolicy and controller Deployment (the embedded
// manifests, customised by the flags; with --monitoring the monitoring pack too) to the
// cluster of a kubeconfig context with server-side apply, and can wait until the
// controller reports the local Cluster Ready.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const (
	// DefaultTimeout is the default of --timeout.
	DefaultTimeout = 5 * time.Minute
	// requestTimeout bounds every request when --request-timeout is not set, so that an
	// API server that accepts connections but never answers cannot hang the command.
	requestTimeout = 30 * time.Second
	// crdEstablishTimeout bounds the wait for the CRDs to be served.
	crdEstablishTimeout = time.Minute
	// pollInterval is how often --wait looks at the local Cluster.
	pollInterval = time.Second
)

const (
	installLong = `
		Install the cluster registry into the cluster of a kubeconfig context.

		It applies, with server-side apply (field manager "kubectl-registry"), the registry's
		CustomResourceDefinitions (Cluster, ClusterFeature, ResourceSyncRule), the registry
		namespace, the RBAC of the controller and of the reader identity peers use, and the
		Deployment that runs the controller ("kubectl registry serve" in the image given by
		--image). The CRDs are applied first and must be established before the rest.

		Each object is reported on one line, as kubectl apply does: created, configured
		(changed) or unchanged. Running install again is safe: it changes only what differs
		from the manifests, so an up-to-date installation reports every object unchanged.

		--cluster-name names this cluster in the group; it is needed the first time, when no
		Cluster describes this cluster yet. --api-server-endpoint is the address peers reach
		this cluster's API server at; the controller in a pod needs it unless the Cluster
		already lists an endpoint.

		--dry-run=client prints what would be applied without contacting the cluster (with -o
		yaml, a stream of YAML documents that kubectl apply -f accepts); --dry-run=server
		sends every object to the API server as a dry run, which validates it and reports
		whether it would be created, configured or unchanged, and persists nothing.

		--wait waits, up to --timeout, until the controller reports the local Cluster (the one
		named --cluster-name, or else the one whose clusterID is the UID of this cluster's
		kube-system namespace) Ready, printing progress on stderr.

		--monitoring also applies the monitoring pack (manifests/monitoring): a ServiceMonitor
		of the controller's metrics, a PrometheusRule with the registry's alerts and the
		Grafana dashboard in a ConfigMap labelled for Grafana's dashboard sidecar. It needs
		the Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule of
		monitoring.coreos.com/v1): when the cluster does not serve them, install stops before
		applying anything. Prometheus scrapes /metrics over HTTPS with its ServiceAccount's
		token, which must be allowed to get /metrics (the ClusterRole
		cluster-registry-metrics-reader grants it).

		The kubeconfig is read like kubectl does (--kubeconfig, --context, ...); its current
		context is never changed. Installing needs the rights to create CRDs, ClusterRoles and
		ClusterRoleBindings (cluster-admin).`

	installExample = `
		# Install into the cluster of the current context, naming it "east" in the group
		kubectl registry install --cluster-name east --api-server-endpoint https://east.example.com:6443

		# Install into another context and wait until the controller reports the cluster Ready
		kubectl registry install --context kind-west --cluster-name west --wait

		# Show what would be applied, without touching the cluster
		kubectl registry install --cluster-name east --dry-run=client -o yaml

		# Ask the API server to validate everything, persisting nothing
		kubectl registry install --cluster-name east --dry-run=server

		# Install with the alerts, ServiceMonitor and dashboard (needs the Prometheus Operator)
		kubectl registry install --cluster-name east --monitoring`
)

// Options holds the flags and the state of "kubectl registry install".
type Options struct {
	// Render customises the manifests: namespace, cluster name, API server endpoint,
	// image and replicas.
	Render manifests.RenderOptions
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Wait waits until the controller reports the local Cluster Ready.
	Wait bool
	// Timeout bounds Wait.
	Timeout time.Duration
	// PrintFlags selects the output: one line per object by default, or -o.
	PrintFlags *genericclioptions.PrintFlags

	// Factory builds the client of the selected context.
	Factory kube.Factory
	cmd     *cobra.Command
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Render: manifests.RenderOptions{
			Namespace: v1alpha1.DefaultNamespace,
			Image:     manifests.DefaultImage,
			Replicas:  manifests.DefaultReplicas,
		},
		DryRun:     cmdutil.DryRunNone,
		Timeout:    DefaultTimeout,
		PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(clientgoscheme.Scheme),
		Factory:    f,
		IOStreams:  streams,
	}
}

// NewCmdInstall returns the "install" command. f is the Factory of the
// root command's kubeconfig flags.
func NewCmdInstall(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "install [--cluster-name NAME] [--api-server-endpoint URL] [--monitoring] [--dry-run=client|server] [--wait] [-o yaml|json|name]",
		DisableFlagsInUseLine: true,
		Short:                 "Install the registry (CRDs, RBAC, controller) into a cluster",
		Long:                  templates.LongDesc(installLong),
		Example:               templates.Examples(installExample),
		Args:                  cmdutil.NoArgs,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of install to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	r := &o.Render
	// Shadows the root's --namespace: for install it is the registry namespace.
	fs.StringVarP(&r.Namespace, "namespace", "n", r.Namespace,
		"Registry namespace: where the controller, its ServiceAccounts and its Secrets live. Created by install.")
	fs.StringVar(&r.ClusterName, "cluster-name", r.ClusterName,
		"Name of this cluster in the group, an RFC 1123 label (lower case alphanumerics and '-'); passed to the controller.")
	fs.StringVar(&r.APIServerEndpoint, "api-server-endpoint", r.APIServerEndpoint,
		"Address peers reach this cluster's API server at (host, host:port or https URL); passed to the controller.")
	fs.StringVar(&r.Image, "image", r.Image, "Image of the controller.")
	fs.Int32Var(&r.Replicas, "replicas", r.Replicas,
		"Replicas of the controller; leader election keeps one active and the others ready to take over.")
	fs.BoolVar(&r.Monitoring, "monitoring", r.Monitoring,
		"Also apply the monitoring pack: ServiceMonitor, PrometheusRule (alerts) and Grafana dashboard. Needs the Prometheus Operator's CRDs (monitoring.coreos.com); without them install stops before applying anything.")
	fs.StringVar(&r.MemberGrants, "member-grants", manifests.MemberGrantsAll,
		`What the members' identities may write here (copies are written as the member they come from, and this cluster's RBAC authorizes them): "all" binds them to what the controller may write (the ClusterRoles labelled `+v1alpha1.ControllerAggregatedLabel+` and the Secrets of the registry namespace); "none" binds them to nothing (and removes that binding if an earlier install made it), so each member writes only what a RoleBinding of this cluster grants its identity.`)
	cmdutil.AddDryRunFlag(cmd, `Must be "none", "client" or "server". "client" prints what would be applied and contacts no cluster; "server" sends every object as a server-side dry run, persisting nothing.`)
	fs.BoolVar(&o.Wait, "wait", o.Wait,
		"Wait until the controller reports the local Cluster Ready (progress on stderr).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout,
		"How long --wait waits before giving up.")
	o.PrintFlags.AddFlags(cmd)
}

// Complete derives the options that follow other flags.
func (o *Options) Complete(cmd *cobra.Command, _ []string) error {
	o.cmd = cmd
	var err error
	o.DryRun, err = cmdutil.GetDryRunStrategy(cmd, cmdutil.DryRunNone, cmdutil.DryRunClient, cmdutil.DryRunServer)
	return err
}

// Validate checks the flags. It does no I/O.
func (o *Options) Validate() error {
	var errs []error
	if o.Render.Replicas < 1 {
		errs = append(errs, fmt.Errorf("--replicas must be at least 1, got %d", o.Render.Replicas))
	}
	if o.Render.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty"))
	}
	if o.Render.Image == "" {
		errs = append(errs, errors.New("--image must not be empty"))
	}
	r := o.Render
	r.Replicas = max(r.Replicas, 1) // reported above
	if err := r.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		errs = append(errs, errors.New("--wait cannot be used with --dry-run: nothing is installed to wait for"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", o.Timeout))
	}
	if _, err := o.PrintFlags.ToPrinter(); err != nil {
		errs = append(errs, fmt.Errorf("--output: %w", err))
	}
	return errors.Join(errs...)
}

// Run installs the registry.
func (o *Options) Run(ctx context.Context) error {
	objs, err := manifests.Render(o.Render)
	if err != nil {
		return err
	}
	if o.DryRun == cmdutil.DryRunClient {
		return o.print(objsAsResults(objs, "serverside-applied"), " (dry run)", objs)
	}

	c, target, err := kube.Connect(o.Factory, o.cmd, kube.ClientOptions{Verb: "install", Timeout: requestTimeout, Warnings: o.ErrOut})
	if err != nil {
		return err
	}
	uid, err := kube.Ping(ctx, c, target, requestTimeout)
	if err != nil {
		return err
	}
	if o.Wait && uid == "" && o.Render.ClusterName == "" {
		return errors.New("--wait cannot tell which Cluster is this cluster's: the kube-system namespace (whose UID is the cluster ID) is not readable; pass --cluster-name")
	}

	if err := checkOtherInstallation(ctx, c, o.Render.Namespace); err != nil {
		return explain(err, target)
	}
	if o.Render.Monitoring {
		if err := checkMonitoringCRDs(c, target); err != nil {
			return err
		}
	}

	crds, others := splitCRDs(objs)
	if o.DryRun == cmdutil.DryRunServer {
		results, live, err := applyServerDryRun(ctx, c, objs, o.Render.Namespace, o.ErrOut)
		if perr := o.print(results, " (server dry run)", live); perr != nil && err == nil {
			err = perr
		}
		return explain(err, target)
	}

	var results []serverside.Result
	applied, err := serverside.Apply(ctx, c, v1alpha1.FieldManager, crds)
	results = append(results, applied...)
	if err == nil {
		err = waitEstablished(ctx, c, crds)
	}
	if err == nil {
		applied, err = serverside.Apply(ctx, c, v1alpha1.FieldManager, others)
		results = append(results, applied...)
	}
	if err != nil {
		// Report what was applied before the failure, then the failure.
		if o.namesOnly() {
			_ = o.printResults(results, "")
		}
		return explain(err, target)
	}
	if o.Render.MemberGrants == manifests.MemberGrantsNone {
		removed, err := removeMembersGrant(ctx, c, o.Render.Namespace)
		if err != nil {
			return explain(err, target)
		}
		results = append(results, removed...)
	}
	if err := o.printApplied(ctx, c, results); err != nil {
		return err
	}

	if o.Render.ClusterName == "" && uid != "" {
		o.warnNoLocalCluster(ctx, c, uid)
	}
	if o.Wait {
		return o.waitReady(ctx, c, uid)
	}
	return nil
}

// explain adds what the user can do about an error of the API server.
func explain(err error, t kube.Target) error {
	return kube.ExplainAdmin(err, t, "installing the registry needs the rights to create CRDs, ClusterRoles and ClusterRoleBindings")
}

// splitCRDs returns the CRDs and the other objects, each in their order.
func splitCRDs(objs []*unstructured.Unstructured) (crds, others []*unstructured.Unstructured) {
	for _, obj := range objs {
		if isCRD(obj) {
			crds = append(crds, obj)
		} else {
			others = append(others, obj)
		}
	}
	return crds, others
}

func isCRD(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == apiextensionsv1.GroupName && gvk.Kind == "CustomResourceDefinition"
}

// waitEstablished waits until the API server serves every CRD.
func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, crdEstablishTimeout)
	defer cancel()
	for _, obj := range crds {
		var last string
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, &crd); err != nil {
				if kube.IsAPIStatus(err) && !apierrors.IsNotFound(err) {
					return false, err
				}
				last = err.Error()
				return false, nil
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("CRD %s: names not accepted: %s", crd.Name, cond.Message)
				}
				if cond.Type == apiextensionsv1.Established {
					if cond.Status == apiextensionsv1.ConditionTrue {
						return true, nil
					}
					last = cond.Message
				}
			}
			return false, nil
		})
		if err != nil {
			if wait.Interrupted(err) && ctx.Err() != nil {
				return fmt.Errorf("CRD %s is not established after %s (last seen: %s)", obj.GetName(), crdEstablishTimeout, orNothing(last))
			}
			return fmt.Errorf("waiting for CRD %s to be established: %w", obj.GetName(), err)
		}
	}
	return nil
}

func orNothing(s string) string {
	if s == "" {
		return "nothing yet"
	}
	return s
}

// applyServerDryRun sends every object to the API server as a server-side apply dry
// run. The API server does not change the resourceVersion of a dry run, so the outcome
// compares the object before and after. Objects in a namespace that does not exist yet
// cannot be dry-run (the namespace is not created by a dry run): they are reported as
// created, with a warning.
func applyServerDryRun(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, namespace string, warn io.Writer) ([]serverside.Result, []*unstructured.Unstructured, error) {
	// The registry namespace and its readers namespace.
	missing := map[string]bool{}
	for _, name := range []string{namespace, v1alpha1.ReadersNamespace(namespace)} {
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); apierrors.IsNotFound(err) {
			missing[name] = true
			fmt.Fprintf(warn, "Warning: namespace %s does not exist yet, so the API server cannot dry-run the objects in it; they are shown as they would be created\n", name)
		}
	}
	var results []serverside.Result
	var live []*unstructured.Unstructured
	for _, obj := range objs {
		if missing[obj.GetNamespace()] {
			results = append(results, serverside.Result{Object: obj, Outcome: serverside.Created})
			live = append(live, obj)
			continue
		}
		outcome, after, err := serverside.ApplyObject(ctx, c, v1alpha1.FieldManager, obj, true)
		if err != nil {
			return results, live, fmt.Errorf("applying %s %s (server dry run): %w", obj.GetKind(), manifests.ObjectName(obj), err)
		}
		results = append(results, serverside.Result{Object: obj, Outcome: outcome})
		live = append(live, after)
	}
	return results, live, nil
}

// warnNoLocalCluster warns when the controller cannot start: no --cluster-name and no
// Cluster describes this cluster.
func (o *Options) warnNoLocalCluster(ctx context.Context, c client.Client, uid types.UID) {
	var list v1alpha1.ClusterList
	if err := c.List(ctx, &list); err != nil {
		return
	}
	for _, cl := range list.Items {
		if cl.Spec.ClusterID == uid {
			return
		}
	}
	fmt.Fprintf(o.ErrOut, "Warning: no Cluster describes this cluster (clusterID %s) and --cluster-name was not given: the controller cannot start until one exists; run install again with --cluster-name\n", uid)
}

// waitReady waits until the controller reports the local Cluster Ready, printing every
// change of what it sees on ErrOut.
func (o *Options) waitReady(ctx context.Context, c client.Client, uid types.UID) error {
	what := "the local Cluster"
	if o.Render.ClusterName != "" {
		what = fmt.Sprintf("Cluster %q", o.Render.ClusterName)
	}
	fmt.Fprintf(o.ErrOut, "Waiting up to %s for the controller to report %s Ready...\n", o.Timeout, what)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// last is the last observation; lastErr the last error reading the cluster, which
	// is reported only when nothing was observed (the last poll's request may fail
	// because the deadline is near).
	var last, lastErr, printed string
	// On a terminal, a live line says what is awaited and for how long.
	progress := cmdutil.NewProgress(o.ErrOut)
	defer progress.Erase()
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		ready, seen, err := o.observe(ctx, c, uid)
		if err != nil {
			if ctx.Err() == nil {
				lastErr = err.Error()
			}
			progress.Show(orNothing(last))
			return false, nil
		}
		last = seen
		if seen != printed {
			progress.Erase()
			fmt.Fprintln(o.ErrOut, seen)
			printed = seen
		}
		if !ready {
			progress.Show(seen)
		}
		return ready, nil
	})
	if err == nil {
		return nil
	}
	if last == "" {
		last = lastErr
	}
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the controller to report %s Ready; last seen: %s\nsee the controller's logs: kubectl logs -n %s deployment/%s",
			o.Timeout, what, orNothing(last), o.Render.Namespace, v1alpha1.ControllerName)
	}
	return fmt.Errorf("waiting for %s: %w", what, err)
}

// observe reports whether the local Cluster is Ready, and what it sees.
func (o *Options) observe(ctx context.Context, c client.Client, uid types.UID) (bool, string, error) {
	var list v1alpha1.ClusterList
	if err := c.List(ctx, &list); err != nil {
		return false, "", fmt.Errorf("cannot list Clusters: %w", err)
	}
	name := o.Render.ClusterName
	var found []v1alpha1.Cluster
	for _, cl := range list.Items {
		if (name != "" && cl.Name == name) || (name == "" && uid != "" && cl.Spec.ClusterID == uid) {
			found = append(found, cl)
		}
	}
	deployment, err := o.deploymentStatus(ctx, c)
	if err != nil {
		return false, "", err
	}
	var seen string
	switch {
	case len(found) == 0 && name != "":
		seen = fmt.Sprintf("the controller has not reported yet: no Cluster %q%s", name, deployment)
	case len(found) == 0:
		seen = fmt.Sprintf("the controller has not reported yet: no Cluster has clusterID %s%s", uid, deployment)
	case len(found) > 1:
		names := make([]string, len(found))
		for i, cl := range found {
			names[i] = cl.Name
		}
		seen = fmt.Sprintf("several Clusters claim this cluster's ID %s: %s", uid, strings.Join(names, ", "))
	default:
		cl := found[0]
		switch {
		case uid != "" && cl.Spec.ClusterID != uid:
			seen = fmt.Sprintf("Cluster %q has clusterID %s, but this cluster's ID is %s: it describes another cluster", cl.Name, cl.Spec.ClusterID, uid)
		case cl.Status.State == "":
			seen = fmt.Sprintf("the controller has not reported yet: Cluster %q has no status%s", cl.Name, deployment)
		case cl.Status.State == v1alpha1.ClusterStateReady:
			return true, fmt.Sprintf("Cluster %q is Ready", cl.Name), nil
		default:
			seen = fmt.Sprintf("Cluster %q is %s", cl.Name, cl.Status.State)
			if cl.Status.Message != "" {
				seen += ": " + cl.Status.Message
			}
		}
	}
	return false, seen, nil
}

// deploymentStatus describes the controller's Deployment for progress messages: ""
// when there is none.
func (o *Options) deploymentStatus(ctx context.Context, c client.Client) (string, error) {
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Render.Namespace, Name: v1alpha1.ControllerName}, &d); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("cannot read the controller's Deployment: %w", err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf(" (deployment %s/%s: %d/%d replicas available)", d.Namespace, d.Name, d.Status.AvailableReplicas, want), nil
}

// checkMonitoringCRDs reports, before anything is applied, when the cluster does not serve
// the Prometheus Operator kinds the monitoring pack holds.
func checkMonitoringCRDs(c client.Client, t kube.Target) error {
	var missing []string
	for _, kind := range manifests.MonitoringKinds {
		gk := schema.GroupKind{Group: manifests.MonitoringGroupVersion.Group, Kind: kind}
		if _, err := c.RESTMapper().RESTMapping(gk, manifests.MonitoringGroupVersion.Version); err != nil {
			if !meta.IsNoMatchError(err) {
				return explain(fmt.Errorf("looking up %s: %w", gk, err), t)
			}
			missing = append(missing, kind)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("--monitoring: %s does not serve %s of %s: install the Prometheus Operator (kube-prometheus-stack, for example) first, or run install without --monitoring; nothing was applied",
		t, strings.Join(missing, " and "), manifests.MonitoringGroupVersion)
}

// checkOtherInstallation refuses to install into namespace when the registry is
// installed in another one: the ClusterRoles and ClusterRoleBindings are cluster-wide, so
// a cluster holds one installation.
func checkOtherInstallation(ctx context.Context, c client.Client, namespace string) error {
	var crb rbacv1.ClusterRoleBinding
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.ControllerName}, &crb); err != nil {
		if kube.IsAPIStatus(err) {
			return nil // not installed, or not readable: the apply reports what matters
		}
		return err
	}
	for _, s := range crb.Subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == v1alpha1.ControllerName && s.Namespace != namespace {
			return fmt.Errorf("the registry is already installed in namespace %q (ClusterRoleBinding %s binds its ServiceAccount), and a cluster holds one installation: run install with --namespace %s, or uninstall it first (kubectl registry uninstall --namespace %s)",
				s.Namespace, crb.Name, s.Namespace, s.Namespace)
		}
	}
	return nil
}

// objsAsResults reports every object with the same outcome.
func objsAsResults(objs []*unstructured.Unstructured, outcome serverside.Outcome) []serverside.Result {
	results := make([]serverside.Result, len(objs))
	for i, obj := range objs {
		results[i] = serverside.Result{Object: obj, Outcome: outcome}
	}
	return results
}

// printApplied prints the results of a real apply: one line per object, or with -o the
// objects as they are now in the cluster.
func (o *Options) printApplied(ctx context.Context, c client.Client, results []serverside.Result) error {
	if o.namesOnly() {
		return o.printResults(results, "")
	}
	live := make([]*unstructured.Unstructured, 0, len(results))
	for _, r := range results {
		if r.Outcome == serverside.Deleted {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.Object.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(r.Object), u); err != nil {
			return fmt.Errorf("reading %s %s back: %w", r.Object.GetKind(), manifests.ObjectName(r.Object), err)
		}
		live = append(live, u)
	}
	return o.printObjects(live)
}

// print prints results (one line per object, the outcome followed by suffix), or with
// -o the objects objs.
func (o *Options) print(results []serverside.Result, suffix string, objs []*unstructured.Unstructured) error {
	if o.namesOnly() {
		return o.printResults(results, suffix)
	}
	return o.printObjects(objs)
}

// namesOnly reports whether the output is one line per object ("" or -o name).
func (o *Options) namesOnly() bool {
	f := ""
	if o.PrintFlags.OutputFormat != nil {
		f = strings.ToLower(*o.PrintFlags.OutputFormat)
	}
	return f == "" || f == "name"
}

// printResults prints one line per result: "kind.group/name outcome", or with -o name
// "kind.group/name".
func (o *Options) printResults(results []serverside.Result, suffix string) error {
	for _, r := range results {
		o.PrintFlags.NamePrintFlags.Operation = string(r.Outcome) + suffix
		p, err := o.PrintFlags.ToPrinter()
		if err != nil {
			return err
		}
		if err := p.PrintObj(r.Object, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// printObjects prints objs with -o: YAML as a stream of documents, every other format
// as a v1 List, as kubectl does.
func (o *Options) printObjects(objs []*unstructured.Unstructured) error {
	p, err := o.PrintFlags.ToPrinter()
	if err != nil {
		return err
	}
	return printObjects(p, strings.ToLower(*o.PrintFlags.OutputFormat), objs, o.Out)
}

// printObjects prints objs with p: one YAML document per object for "yaml", else one
// v1 List holding them.
func printObjects(p printers.ResourcePrinter, format string, objs []*unstructured.Unstructured, w io.Writer) error {
	if format == "yaml" {
		for _, obj := range objs {
			if err := p.PrintObj(obj, w); err != nil {
				return err
			}
		}
		return nil
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
	for _, obj := range objs {
		list.Items = append(list.Items, *obj)
	}
	return p.PrintObj(list, w)
}

// removeMembersGrant deletes the members' default grant an earlier install made
// (--member-grants=all), so that --member-grants=none leaves the members only what the
// admin binds them: the objects of rbac-members.yaml, in namespace where namespaced, and
// only when they carry the registry's part-of label.
func removeMembersGrant(ctx context.Context, c client.Client, namespace string) ([]serverside.Result, error) {
	objs, err := manifests.Render(manifests.RenderOptions{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	var removed []serverside.Result
	for _, obj := range objs {
		if !manifests.IsMembersGrant(obj) {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return removed, fmt.Errorf("reading %s %s: %w", obj.GetKind(), manifests.ObjectName(obj), err)
		}
		if live.GetLabels()["app.kubernetes.io/part-of"] != "kubectl-registry" {
			continue // the admin's own object of that name
		}
		if err := c.Delete(ctx, live); err != nil && !apierrors.IsNotFound(err) {
			return removed, fmt.Errorf("removing the members' default grant %s %s: %w", obj.GetKind(), manifests.ObjectName(obj), err)
		}
		removed = append(removed, serverside.Result{Object: obj, Outcome: serverside.Deleted})
	}
	return removed, nil
}
