// Package edit implements "kubectl registry edit": one editor session on a
// ResourceSyncRule or a ClusterFeature, read from one kubeconfig context and applied
// (server-side apply) to the clusters of several contexts in parallel, with a result
// per context.
package edit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/manifests"
	"github.com/kubectl-registry/kubectl-registry/manifests/serverside"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/serverapply"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const (
	editLong = `
		Edit a ResourceSyncRule or a ClusterFeature on the clusters of several kubeconfig
		contexts at once.

		The object is read from the first context of --contexts (or the current context, or
		--context), written as YAML without the fields the API server sets (uid,
		resourceVersion, generation, creationTimestamp, managedFields, status) to a
		temporary file, and opened in an editor: $KUBE_EDITOR, else $EDITOR, else vi.

		When the editor exits, the edited object is applied with server-side apply (field
		manager "kubectl-registry", taking over conflicting fields) to the cluster of every
		context, in parallel, each context within 30 seconds; where the object is missing it
		is created. Each context is reported as kubectl apply does:

		    cluster-a: resourcesyncrule.clusterregistry.k8s.cisco.com/my-rule configured

		(created, configured or unchanged). The others are still applied when a context
		fails; the command then exits with 2 and an error that names each failed context
		with its reason, and the edited file is kept so that it can be applied again with
		"kubectl registry apply -f".

		Saving the file unchanged, or empty, cancels the edit. An edited file that is not
		valid YAML, or that changes the kind or the name of the object, is not applied: the
		command exits with 2 and keeps the file.

		Clusters cannot be edited: each controller writes its own cluster's Cluster, and
		"kubectl registry join" copies them.

		A field removed in the editor is removed on every cluster that has it, also when
		another field manager set it (with a merge patch after the apply).`

	editExample = `
		# Edit a rule on three clusters
		kubectl registry edit rsr test-secret-sink --contexts east,west,north

		# Edit a feature on the current context
		kubectl registry edit clusterfeature test-secret-source

		# Use another editor
		KUBE_EDITOR="code --wait" kubectl registry edit cf/test-secret-source --contexts east,west`
)

// CancelledMessage is printed on stderr when the editor left the object unchanged or
// emptied the file.
const CancelledMessage = "Edit cancelled, no changes made."

// kinds maps the TYPE argument (lower case) to the kind it edits.
var kinds = map[string]string{}

// clusterTypes are the TYPEs of the Cluster kind, which edit refuses.
var clusterTypes = map[string]bool{}

func init() {
	group := v1alpha1.GroupVersion.Group
	add := func(kind string, aliases ...string) {
		singular := strings.ToLower(kind)
		for _, n := range append(aliases, singular, singular+"s") {
			kinds[n] = kind
		}
		kinds[singular+"."+group] = kind
		kinds[singular+"s."+group] = kind
	}
	add("ResourceSyncRule", "rsr", "rule", "rules")
	add("ClusterFeature", "cf", "feature", "features")
	for _, n := range []string{"cluster", "clusters", "cluster." + group, "clusters." + group} {
		clusterTypes[n] = true
	}
}

// Options holds the flags and the state of "kubectl registry edit".
type Options struct {
	// Type is the TYPE argument: rsr, resourcesyncrule(s), cf, clusterfeature(s), ...
	Type string
	// Name is the name of the object.
	Name string
	// Contexts are the kubeconfig contexts to apply to; the object is read from the
	// first. Empty: the current one (or --context).
	Contexts []string
	// Timeout bounds the work on each context, reading and applying apart (the editor
	// session is not bounded).
	Timeout time.Duration

	// Set by Complete and Run.
	cmd     *cobra.Command
	gvk     schema.GroupVersionKind
	targets []kube.Target

	// Factory resolves the contexts and builds the clients.
	Factory kube.Factory
	// Edit opens the editor on the file at path and returns when it exits: kubectl's
	// editor ($KUBE_EDITOR, $EDITOR, vi) by default; tests edit the file themselves.
	Edit func(path string) error
	genericiooptions.IOStreams
}

// NewOptions returns Options with the defaults of the flags.
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{
		Timeout:   serverapply.ContextTimeout,
		Factory:   f,
		Edit:      launchEditor,
		IOStreams: streams,
	}
}

// NewCmdEdit returns the "edit" command. f is the Factory of the
// root command's kubeconfig flags.
func NewCmdEdit(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdEdit(NewOptions(f, streams))
}

// newCmdEdit returns the "edit" command of o (tests set its editor).
func newCmdEdit(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "edit (rsr|cf) NAME [--contexts A,B,...]",
		DisableFlagsInUseLine: true,
		Short:                 "Edit a ResourceSyncRule or ClusterFeature once and apply it to several contexts",
		Long:                  templates.LongDesc(editLong),
		Example:               templates.Examples(editExample),
		Args:                  typeNameArgs,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// typeNameArgs accepts "TYPE NAME" and "TYPE/NAME".
func typeNameArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		return nil
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		return nil
	case len(args) < 2:
		return cmdutil.UsageErrorf(cmd, "TYPE and NAME are required, e.g. %q", "edit rsr my-rule")
	default:
		return cmdutil.UsageErrorf(cmd, "exactly one TYPE and one NAME are allowed, got %d arguments: %s", len(args), strings.Join(args, " "))
	}
}

// AddFlags adds the flags of edit to cmd.
func (o *Options) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&o.Contexts, "contexts", o.Contexts,
		"Kubeconfig contexts to apply the edited object to, comma-separated; it is read from the first. The current context (or --context) when empty.")
}

// Complete takes TYPE and NAME from the arguments. The contexts are resolved by Run,
// after Validate.
func (o *Options) Complete(cmd *cobra.Command, args []string) error {
	o.cmd = cmd
	switch len(args) {
	case 1:
		o.Type, o.Name, _ = strings.Cut(args[0], "/")
	case 2:
		o.Type, o.Name = args[0], args[1]
	}
	return nil
}

// Validate checks the arguments and the flags. It does no I/O.
func (o *Options) Validate() error {
	var errs []error
	t := strings.ToLower(o.Type)
	switch {
	case clusterTypes[t]:
		//lint:ignore ST1005 the message begins with the kind's name, which keeps its case
		errs = append(errs, errors.New("Clusters cannot be edited: they are owned by the controllers (each controller writes its own cluster's Cluster, and \"kubectl registry join\" copies them); use \"kubectl registry join\" or \"kubectl registry leave\" to change the group"))
	case kinds[t] == "":
		errs = append(errs, fmt.Errorf("unknown TYPE %q: edit takes rsr (resourcesyncrule) or cf (clusterfeature)", o.Type))
	default:
		o.gvk = v1alpha1.GroupVersion.WithKind(kinds[t])
	}
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid NAME %q: %s", o.Name, strings.Join(msgs, "; ")))
	}
	if err := kube.ValidateContexts(o.Contexts); err != nil {
		errs = append(errs, err)
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout must be positive, got %s", o.Timeout))
	}
	return errors.Join(errs...)
}

// Run reads the object, opens the editor once and applies the result to every context.
func (o *Options) Run(ctx context.Context) error {
	targets, err := o.Factory.Targets(o.cmd, o.Contexts)
	if err != nil {
		return err
	}
	o.targets = targets

	live, err := o.read(ctx, targets[0])
	if err != nil {
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError, Err: err}
	}
	body, err := yaml.Marshal(live.Object)
	if err != nil {
		return fmt.Errorf("writing %s as YAML: %w", serverapply.ObjectRef(live), err)
	}
	original := append([]byte(o.header()), body...)

	f, err := os.CreateTemp("", "kubectl-registry-edit-*.yaml")
	if err != nil {
		return fmt.Errorf("creating the file to edit: %w", err)
	}
	path := f.Name()
	_, werr := f.Write(original)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	if err := o.Edit(path); err != nil {
		return keep(path, err)
	}
	edited, err := os.ReadFile(path)
	if err != nil {
		return keep(path, fmt.Errorf("reading the edited file: %w", err))
	}

	if bytes.Equal(stripComments(original), stripComments(edited)) || len(bytes.TrimSpace(stripComments(edited))) == 0 {
		_ = os.Remove(path)
		_, err := fmt.Fprintln(o.ErrOut, CancelledMessage)
		return err
	}
	obj, err := o.parse(edited, live)
	if err != nil {
		return keep(path, err)
	}
	if obj == nil { // only empty documents left
		_ = os.Remove(path)
		_, err := fmt.Fprintln(o.ErrOut, CancelledMessage)
		return err
	}
	if err := o.applyAll(ctx, obj, removedPaths(live.Object, obj.Object, nil), path); err != nil {
		return err
	}
	_ = os.Remove(path)
	return nil
}

// keep returns err as an exit code 2 error that tells where the edited file is kept.
func keep(path string, err error) error {
	return &cmdutil.ExitError{Code: cmdutil.ExitCodeError,
		Err: fmt.Errorf("%w\nthe edited file is kept in %s", err, path)}
}

// header is the comment at the top of the file to edit.
func (o *Options) header() string {
	var b strings.Builder
	b.WriteString("# Please edit the object below. Lines beginning with a '#' will be ignored,\n")
	b.WriteString("# and an empty file will abort the edit.\n")
	b.WriteString("#\n")
	fmt.Fprintf(&b, "# Read from context %s. On save it is applied (server-side apply, field manager\n", o.targets[0].Name)
	fmt.Fprintf(&b, "# %q) to the contexts below, and created where it is missing:\n", v1alpha1.FieldManager)
	for _, t := range o.targets {
		fmt.Fprintf(&b, "#   %s\n", t.Name)
	}
	b.WriteString("#\n")
	return b.String()
}

// read gets the object from t, without the fields the API server sets.
func (o *Options) read(ctx context.Context, t kube.Target) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := o.Factory.Client(t, kube.ClientOptions{Verb: "edit", Timeout: o.Timeout, Warnings: o.ErrOut})
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(o.gvk)
	if err := c.Get(ctx, client.ObjectKey{Name: o.Name}, obj); err != nil {
		return nil, explainRead(err, o.gvk, o.Name, t)
	}
	sanitize(obj)
	return obj, nil
}

// explainRead wraps an error of reading the object from t.
func explainRead(err error, gvk schema.GroupVersionKind, name string, t kube.Target) error {
	ref := strings.ToLower(gvk.Kind) + "." + gvk.Group + "/" + name
	var status apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %s not found", t.Name, ref)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%s: the API server at %s does not serve kind %s; is the registry installed? run: kubectl registry install --context %s: %w", t.Name, t.Config.Host, gvk, t.Name, err)
	case errors.As(err, &status):
		return fmt.Errorf("%s: reading %s: %w", t.Name, ref, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: reading %s: no answer from the API server at %s: %w", t.Name, ref, t.Config.Host, err)
	default:
		return fmt.Errorf("%s: cannot reach the API server at %s: %w", t.Name, t.Config.Host, err)
	}
}

// sanitize removes what the API server sets, and the controller's finalizer (each
// controller keeps it on its own cluster from spec.deletionPolicy).
func sanitize(obj *unstructured.Unstructured) {
	delete(obj.Object, "status")
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return
	}
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		delete(md, f)
	}
	if fins := obj.GetFinalizers(); slices.Contains(fins, v1alpha1.RuleFinalizer) {
		fins = slices.DeleteFunc(fins, func(f string) bool { return f == v1alpha1.RuleFinalizer })
		obj.SetFinalizers(fins)
		if len(fins) == 0 {
			delete(md, "finalizers")
		}
	}
}

// parse decodes the edited file and checks that it is still the same object. It returns
// nil when the file holds no object.
func (o *Options) parse(edited []byte, orig *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	objs, err := manifests.Decode(edited)
	if err != nil {
		return nil, fmt.Errorf("the edited file is not a valid object: %w", err)
	}
	switch len(objs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("the edited file holds %d objects, want one", len(objs))
	}
	obj := objs[0]
	switch {
	case obj.GroupVersionKind() != orig.GroupVersionKind():
		return nil, fmt.Errorf("the apiVersion and kind cannot be changed: %s %s, edited to %s %s",
			orig.GetAPIVersion(), orig.GetKind(), obj.GetAPIVersion(), obj.GetKind())
	case obj.GetName() != orig.GetName():
		return nil, fmt.Errorf("the name cannot be changed: %q, edited to %q", orig.GetName(), obj.GetName())
	case obj.GetNamespace() != "":
		return nil, fmt.Errorf("a %s has no namespace, edited to %q", obj.GetKind(), obj.GetNamespace())
	}
	sanitize(obj)
	pruneNulls(obj.Object)
	return obj, nil
}

// pruneNulls removes, recursively, the fields of m whose value is null: "labels:" left
// without entries in the editor means no labels.
func pruneNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNulls(v)
		}
	}
}

// result is what applying to one context did.
type result struct {
	outcome serverside.Outcome
	err     error
}

// applyAll applies obj to every target in parallel, then prints the results in the
// order of the contexts. When a context fails, the edited file at path is kept for a
// retry.
// removed are the fields the editor removed.
func (o *Options) applyAll(ctx context.Context, obj *unstructured.Unstructured, removed [][]string, path string) error {
	results := make([]result, len(o.targets))
	var wg sync.WaitGroup
	for i, t := range o.targets {
		wg.Go(func() { results[i] = o.applyTo(ctx, t, obj.DeepCopy(), removed) })
	}
	wg.Wait()

	ref := serverapply.ObjectRef(obj)
	var failed []*cmdutil.ContextError
	var names []string
	for i, t := range o.targets {
		r := results[i]
		if r.err != nil {
			failed = append(failed, &cmdutil.ContextError{Context: t.Name, Errs: []error{r.err}})
			names = append(names, t.Name)
			continue
		}
		if _, err := fmt.Fprintf(o.Out, "%s: %s %s\n", t.Name, ref, r.outcome); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return &cmdutil.ExitError{Code: cmdutil.ExitCodeError, Err: &cmdutil.ContextsError{
			Doing: "editing", Total: len(o.targets), Failed: failed,
			Hint: fmt.Sprintf("the edited file is kept; retry with: kubectl registry apply -f %s --contexts %s", path, strings.Join(names, ",")),
		}}
	}
	return nil
}

// applyTo applies obj to one target within Timeout, then removes the fields of removed
// that the object still has there: server-side apply removes a field only when no other
// field manager set it too, and an edit that removes a field must remove it.
func (o *Options) applyTo(ctx context.Context, t kube.Target, obj *unstructured.Unstructured, removed [][]string) result {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := o.Factory.Client(t, kube.ClientOptions{Verb: "edit", Timeout: o.Timeout, Warnings: o.ErrOut})
	if err != nil {
		return result{err: err}
	}
	outcome, live, err := serverapply.Object(ctx, c, obj, false)
	if err != nil {
		return result{err: serverapply.Explain(err, obj, t)}
	}
	patch := map[string]any{}
	for _, p := range removed {
		if _, found, _ := unstructured.NestedFieldNoCopy(live.Object, p...); found {
			if err := unstructured.SetNestedField(patch, nil, p...); err != nil {
				return result{err: fmt.Errorf("removing %s: %w", strings.Join(p, "."), err)}
			}
		}
	}
	if len(patch) == 0 {
		return result{outcome: outcome}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return result{err: err}
	}
	before := live.GetResourceVersion()
	if err := c.Patch(ctx, live, client.RawPatch(types.MergePatchType, data), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return result{err: serverapply.Explain(err, obj, t)}
	}
	if outcome == serverside.Unchanged && live.GetResourceVersion() != before {
		outcome = serverside.Configured
	}
	return result{outcome: outcome}
}

// removedPaths returns the paths of the fields of orig that edited no longer has. It
// descends into objects, down to the keys of a removed object, but not into lists:
// server-side apply replaces the (atomic) lists of the registry's kinds whole.
func removedPaths(orig, edited map[string]any, prefix []string) [][]string {
	var paths [][]string
	for k, v := range orig {
		path := append(slices.Clone(prefix), k)
		ev, ok := edited[k]
		om, isMap := v.(map[string]any)
		switch {
		case !ok && isMap:
			// Remove the keys the user saw, not those other clusters may have.
			paths = append(paths, removedPaths(om, nil, path)...)
		case !ok:
			paths = append(paths, path)
		case isMap:
			if em, ok := ev.(map[string]any); ok {
				paths = append(paths, removedPaths(om, em, path)...)
			}
		}
	}
	slices.SortFunc(paths, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	return paths
}

// stripComments drops the lines whose first non-blank character is '#'.
func stripComments(data []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			continue
		}
		out = append(out, line)
	}
	return bytes.Join(out, []byte("\n"))
}
