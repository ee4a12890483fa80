// Package uninstall implements "kubectl registry uninstall": it deletes what "kubectl
// registry install" created (the controller's Deployment, the RBAC, the ServiceAccounts
// and the registry namespace), and the CRDs only when asked.
package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Outcomes of deleting one object.
const (
	Deleted  = "deleted"
	NotFound = "not found"
)

const (
	// DefaultTimeout is the default of --timeout.
	DefaultTimeout = 5 * time.Minute
	// requestTimeout bounds every request when --request-timeout is not set.
	requestTimeout = 30 * time.Second
	// pollInterval is how often --wait looks at what is being deleted.
	pollInterval = 500 * time.Millisecond
	// retryInterval is how often --wait asks the API server to retry finalizing a CRD
	// whose objects it failed to delete (see nudge).
	retryInterval = 5 * time.Second
)

const (
	uninstallLong = `
		Uninstall the cluster registry from the cluster of a kubeconfig context.

		It deletes what "kubectl registry install" created: the controller's Deployment, the
		RBAC of the controller and of the reader identity (Roles, RoleBindings, ClusterRoles,
		ClusterRoleBindings), their ServiceAccounts and the registry namespace, with everything
		in it (the reader kubeconfig Secrets of this cluster and of its peers, the leader
		election Lease). Each object is reported on one line: deleted, or not found.

		The CustomResourceDefinitions stay, and with them every Cluster, ClusterFeature and
		ResourceSyncRule of this cluster, so that installing again picks up where it left off.
		--delete-crds deletes them too: deleting a CRD deletes every object of its kind, so
		this removes every Cluster, ClusterFeature and ResourceSyncRule of this cluster for
		good. The CRDs are deleted first, while the controller still runs, so that it can
		finish the ResourceSyncRules that wait for it (deletionPolicy Delete); a CRD whose
		objects keep finalizers that no controller removes stays terminating, which --wait
		reports.

		Uninstalling does not tell the other members of the group: they keep this cluster's
		Cluster and report it unreachable. Run "kubectl registry leave" first to remove it
		from the group.

		Namespaces and CRDs take a while to go away (their contents are deleted first); --wait
		waits, up to --timeout, until everything deleted is gone, printing progress on stderr,
		and otherwise fails with what is still there and why. When the API server failed to
		delete a CRD's objects (for example "storage is (re)initializing" while the CRD's
		cache starts), --wait asks it to retry every few seconds instead of after its growing
		back-off.
		--dry-run=client reports what would be deleted and deletes nothing.

		The kubeconfig is read like kubectl does (--kubeconfig, --context, ...); its current
		context is never changed.`

	uninstallExample = `
		# Uninstall from the cluster of the current context, keeping the CRDs and the registry objects
		kubectl registry uninstall

		# See what would be deleted
		kubectl registry uninstall --dry-run=client

		# Remove everything, CRDs and every Cluster, ClusterFeature and ResourceSyncRule included,
		# and wait until it is gone
		kubectl registry uninstall --context kind-west --delete-crds --wait`
)

// Options holds the flags and the state of "kubectl registry uninstall".
type Options struct {
	// Namespace is the registry namespace.
	Namespace string
	// DeleteCRDs deletes the CRDs, and with them every registry object.
	DeleteCRDs bool
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// Wait waits until every deleted object is gone.
	Wait bool
	// Timeout bounds Wait.
	Timeout time.Duration
	// Output is "" (one line per object with its outcome) or "name" (the names of the
	// deleted objects).
	Output string

	// Factory builds the client of the selected context.
	Factory kube.Factory
	cmd     *cobra.Command
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Namespace: v1alpha1.DefaultNamespace,
		DryRun:    cmdutil.DryRunNone,
		Timeout:   DefaultTimeout,
		Factory:   f,
		IOStreams: streams,
	}
}

// NewCmdUninstall returns the "uninstall" command. f is the Factory of the
// root command's kubeconfig flags.
func NewCmdUninstall(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "uninstall [--delete-crds] [--dry-run=client] [--wait]",
		DisableFlagsInUseLine: true,
		Short:                 "Uninstall the registry from a cluster (keeps the CRDs unless --delete-crds)",
		Long:                  templates.LongDesc(uninstallLong),
		Example:               templates.Examples(uninstallExample),
		Args:                  cmdutil.NoArgs,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of uninstall to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	// Shadows the root's --namespace: for uninstall it is the registry namespace.
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace,
		"Registry namespace the registry was installed in; deleted with everything in it.")
	fs.BoolVar(&o.DeleteCRDs, "delete-crds", o.DeleteCRDs,
		"Also delete the CRDs. This deletes every Cluster, ClusterFeature and ResourceSyncRule of this cluster.")
	cmdutil.AddDryRunFlag(cmd, `Must be "none", "client" or "server". "client" reports what would be deleted and deletes nothing; "server" sends the deletions as server-side dry runs.`)
	fs.BoolVar(&o.Wait, "wait", o.Wait,
		"Wait until everything deleted is gone (namespaces and CRDs take a while; progress on stderr).")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "How long --wait waits before giving up.")
	fs.StringVarP(&o.Output, "output", "o", o.Output,
		`Output format: "name" prints the names of the deleted objects only.`)
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
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty"))
	} else if err := (manifests.RenderOptions{Namespace: o.Namespace}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		errs = append(errs, errors.New("--wait cannot be used with --dry-run: nothing is deleted to wait for"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, got %s", o.Timeout))
	}
	if o.Output != "" && o.Output != "name" {
		errs = append(errs, fmt.Errorf(`--output must be "name", got %q`, o.Output))
	}
	return errors.Join(errs...)
}

// Plan returns the objects uninstall deletes, in order: the CRDs first when they are
// deleted (while the controller still runs to finalize what it must), then the
// controller's Deployment, the RBAC and ServiceAccounts, and the namespace last.
func (o *Options) Plan() ([]*unstructured.Unstructured, error) {
	objs, err := manifests.Render(manifests.RenderOptions{Namespace: o.Namespace})
	if err != nil {
		return nil, err
	}
	var crds, others []*unstructured.Unstructured
	for _, obj := range slices.Backward(objs) {
		if isCRD(obj) {
			crds = append(crds, obj)
		} else {
			others = append(others, obj)
		}
	}
	if !o.DeleteCRDs {
		return others, nil
	}
	return append(crds, others...), nil
}

func isCRD(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == apiextensionsv1.GroupName && gvk.Kind == "CustomResourceDefinition"
}

// Run uninstalls the registry.
func (o *Options) Run(ctx context.Context) error {
	objs, err := o.Plan()
	if err != nil {
		return err
	}
	c, t, err := kube.Connect(o.Factory, o.cmd, kube.ClientOptions{Verb: "uninstall", Timeout: requestTimeout, Warnings: o.ErrOut})
	if err != nil {
		return err
	}
	if _, err := kube.Ping(ctx, c, t, requestTimeout); err != nil {
		return err
	}
	if err := checkNamespace(ctx, c, o.Namespace); err != nil {
		return err
	}

	if o.DryRun == cmdutil.DryRunNone {
		if err := disarmAggregation(ctx, c, objs); err != nil {
			return explain(err, t)
		}
	}

	var deleted []*unstructured.Unstructured
	for _, obj := range objs {
		outcome, err := o.deleteOne(ctx, c, obj)
		if err != nil {
			return explain(fmt.Errorf("deleting %s %s: %w", obj.GetKind(), manifests.ObjectName(obj), err), t)
		}
		if err := o.print(obj, outcome); err != nil {
			return err
		}
		if outcome == Deleted {
			deleted = append(deleted, obj)
		}
	}
	if o.Wait && len(deleted) > 0 {
		return o.waitGone(ctx, c, deleted)
	}
	return nil
}

// deleteOne deletes obj (or, in a client dry run, looks it up) and returns the outcome.
func (o *Options) deleteOne(ctx context.Context, c client.Client, obj *unstructured.Unstructured) (string, error) {
	if o.DryRun == cmdutil.DryRunClient {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			if apierrors.IsNotFound(err) {
				return NotFound, nil
			}
			return "", err
		}
		return Deleted, nil
	}
	opts := []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}
	if o.DryRun == cmdutil.DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	err := c.Delete(ctx, obj.DeepCopy(), opts...)
	switch {
	case err == nil:
		return Deleted, nil
	case apierrors.IsNotFound(err):
		return NotFound, nil
	case apierrors.IsConflict(err) && terminating(ctx, c, obj):
		// A namespace that is already being deleted answers a conflict.
		return Deleted, nil
	default:
		return "", err
	}
}

// disarmAggregation removes the aggregationRule of the aggregated ClusterRoles about to
// be deleted. kube-controller-manager's aggregation controller server-side applies the
// rules of an aggregated ClusterRole whenever a ClusterRole changes; an apply that was
// under way when the ClusterRole was deleted would create it again. Without its
// aggregationRule the controller leaves it alone.
func disarmAggregation(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if obj.GetKind() != "ClusterRole" || obj.GroupVersionKind().Group != rbacv1.GroupName {
			continue
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "aggregationRule"); !found {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"aggregationRule":null}`))
		if err := c.Patch(ctx, obj.DeepCopy(), patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the aggregationRule of ClusterRole %s before deleting it: %w", obj.GetName(), err)
		}
	}
	return nil
}

// terminating reports whether obj exists and is being deleted.
func terminating(ctx context.Context, c client.Client, obj *unstructured.Unstructured) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		return false
	}
	return u.GetDeletionTimestamp() != nil
}

// print prints one object's outcome: "kind.group/name outcome", or with -o name the
// names of the deleted objects.
func (o *Options) print(obj *unstructured.Unstructured, outcome string) error {
	suffix := ""
	switch o.DryRun {
	case cmdutil.DryRunClient:
		suffix = " (dry run)"
	case cmdutil.DryRunServer:
		suffix = " (server dry run)"
	}
	p := &printers.NamePrinter{Operation: outcome}
	if outcome == Deleted {
		p.Operation += suffix
	}
	if o.Output == "name" {
		if outcome != Deleted {
			return nil
		}
		p.ShortOutput = true
	}
	return p.PrintObj(obj, o.Out)
}

// waitGone waits until every object of objs is gone, printing on ErrOut what is gone.
func (o *Options) waitGone(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	var slow []string
	for _, obj := range objs {
		if isCRD(obj) || obj.GetKind() == "Namespace" {
			slow = append(slow, displayName(obj))
		}
	}
	fmt.Fprintf(o.ErrOut, "Waiting up to %s for %s to be deleted...\n", o.Timeout, strings.Join(slow, ", "))
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	progress := cmdutil.NewProgress(o.ErrOut) // a live line, on a terminal only
	defer progress.Erase()
	remaining := slices.Clone(objs)
	states := map[string]string{}    // what was last seen of each remaining object
	nudged := map[string]time.Time{} // when each CRD was last nudged
	start := time.Now()
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		var still []*unstructured.Unstructured
		for _, obj := range remaining {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), u)
			switch {
			case apierrors.IsNotFound(err):
				if isCRD(obj) || obj.GetKind() == "Namespace" {
					progress.Erase()
					fmt.Fprintf(o.ErrOut, "%s is gone\n", displayName(obj))
				}
				delete(states, displayName(obj))
				continue
			case err != nil:
				if _, seen := states[displayName(obj)]; !seen && ctx.Err() == nil {
					states[displayName(obj)] = "cannot read it: " + err.Error()
				}
			case u.GetDeletionTimestamp() == nil:
				// Created again after it was deleted: delete it again.
				states[displayName(obj)] = "created again after it was deleted"
				if err := c.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					states[displayName(obj)] += "; deleting it again: " + err.Error()
				}
			default:
				states[displayName(obj)] = describe(u)
				if isCRD(obj) && instanceDeletionFailed(u) && time.Since(nudged[obj.GetName()]) >= retryInterval {
					nudged[obj.GetName()] = time.Now()
					if err := nudge(ctx, c, u); err != nil && ctx.Err() == nil {
						states[displayName(obj)] += "; asking the API server to retry: " + err.Error()
					}
				}
			}
			still = append(still, obj)
		}
		remaining = still
		var pending []string
		for _, obj := range remaining {
			pending = append(pending, displayName(obj)+": "+states[displayName(obj)])
		}
		progress.Show(pending...)
		return len(remaining) == 0, nil
	})
	if err == nil {
		return nil
	}
	var left []string
	for _, obj := range remaining {
		left = append(left, displayName(obj)+" ("+states[displayName(obj)]+")")
	}
	if parent.Err() != nil {
		// Stopped from outside (Ctrl-C, the caller's deadline), not by --timeout.
		return fmt.Errorf("stopped after %s waiting for the deletion to finish: %w; still present: %s",
			time.Since(start).Round(time.Second), context.Cause(parent), strings.Join(left, "; "))
	}
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s waiting for the deletion to finish; still present: %s",
			o.Timeout, strings.Join(left, "; "))
	}
	return fmt.Errorf("waiting for the deletion to finish: %w", err)
}

// instanceDeletionFailed reports whether the API server failed to delete the objects of a
// CRD being deleted (its Terminating condition has reason InstanceDeletionFailed, for
// example "could not list instances: storage is (re)initializing" while the CRD's watch
// cache starts). The API server retries with a per-CRD back-off that doubles up to 1000 s,
// so a CRD that failed a dozen times in a row is retried only minutes later.
func instanceDeletionFailed(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == string(apiextensionsv1.Terminating) && m["status"] == string(apiextensionsv1.ConditionTrue) && m["reason"] == "InstanceDeletionFailed" {
			return true
		}
	}
	return false
}

// nudge makes the API server retry finalizing crd now rather than after its back-off: a
// change of the CRD's metadata requeues it in the API server's CRD finalizer at once.
func nudge(ctx context.Context, c client.Client, crd *unstructured.Unstructured) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.UninstallRetryAnnotation: time.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	return c.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch))
}

// describe says why an object that was deleted is still there.
func describe(u *unstructured.Unstructured) string {
	if u.GetDeletionTimestamp() == nil {
		return "not being deleted"
	}
	var reasons []string
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		// Namespaces report what is left with True conditions (NamespaceContentRemaining,
		// NamespaceFinalizersRemaining, ...); CRDs with Terminating.
		if status == "True" && msg != "" && (strings.HasPrefix(typ, "Namespace") || typ == "Terminating") {
			reasons = append(reasons, msg)
		}
	}
	if len(reasons) == 0 {
		return "terminating"
	}
	return "terminating: " + strings.Join(reasons, "; ")
}

func displayName(obj *unstructured.Unstructured) string {
	gk := obj.GroupVersionKind().GroupKind()
	kind := strings.ToLower(gk.Kind)
	if gk.Group != "" {
		kind += "." + gk.Group
	}
	return kind + "/" + obj.GetName()
}

// checkNamespace refuses to uninstall from namespace when the registry's cluster-wide
// RBAC belongs to an installation in another namespace.
func checkNamespace(ctx context.Context, c client.Client, namespace string) error {
	var crb rbacv1.ClusterRoleBinding
	if err := c.Get(ctx, client.ObjectKey{Name: v1alpha1.ControllerName}, &crb); err != nil {
		return nil // not installed, or not readable: the deletions report what matters
	}
	for _, s := range crb.Subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == v1alpha1.ControllerName && s.Namespace != namespace {
			return fmt.Errorf("the registry is installed in namespace %q, not %q (ClusterRoleBinding %s binds its ServiceAccount): run uninstall with --namespace %s",
				s.Namespace, namespace, crb.Name, s.Namespace)
		}
	}
	return nil
}

// explain adds what the user can do about an error.
func explain(err error, t kube.Target) error {
	return kube.ExplainAdmin(err, t, "uninstalling the registry needs the rights to delete CRDs, ClusterRoles and ClusterRoleBindings")
}
