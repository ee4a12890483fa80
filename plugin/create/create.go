// Package create implements "kubectl registry create rule" and "kubectl registry create
// feature": helpers that write a correct ResourceSyncRule or ClusterFeature from flags,
// validate it before anything is sent, and either server-side apply it to the cluster of
// a kubeconfig context or, with --dry-run=client, print it (e.g. -o yaml for GitOps or
// for "kubectl registry apply -f - --contexts ...").
package create

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/serverapply"
)

const (
	createLong = `
		Create a ResourceSyncRule or a ClusterFeature from flags.

		The object is validated before anything is sent (names, feature names, label
		selectors), then applied to the cluster of the current context (or --context) with
		server-side apply (field manager "kubectl-registry"). --dry-run=client prints it
		without contacting any cluster: with -o yaml, a document to keep in Git or to pipe
		into "kubectl registry apply -f - --contexts a,b,c".`

	createExample = `
		# Sync the Secret cluster-registry/test-secret from every peer (the seed's rule)
		kubectl registry create rule test-secret-sink --kind Secret --name test-secret --namespace-match cluster-registry

		# Mark this cluster as offering a feature
		kubectl registry create feature test-secret-source --feature test-secret-feature

		# Write a rule for every member of the group
		kubectl registry create rule app-config --kind ConfigMap --label-selector app=web --dry-run=client -o yaml \
		  | kubectl registry apply -f - --contexts east,west,north`
)

// NewCmdCreate returns the "create" command and its subcommands "rule" and "feature".
// f is the Factory of the root command's kubeconfig flags.
func NewCmdCreate(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "create (rule|feature) NAME [flags]",
		DisableFlagsInUseLine: true,
		Short:                 "Create a ResourceSyncRule or a ClusterFeature from flags",
		Long:                  templates.LongDesc(createLong),
		Example:               templates.Examples(createExample),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.UsageErrorf(cmd, "unknown object type %q: create takes rule or feature", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmdutil.UsageErrorf(cmd, "create needs an object type: rule or feature")
		},
	}
	cmd.AddCommand(
		NewCmdCreateRule(f, streams),
		NewCmdCreateFeature(f, streams),
	)
	return cmd
}

// nameArg is the positional argument NAME of the subcommands.
func nameArg(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return cmdutil.UsageErrorf(cmd, "NAME is required")
	default:
		return cmdutil.UsageErrorf(cmd, "exactly one NAME is allowed, got %d arguments: %s", len(args), strings.Join(args, " "))
	}
}

// common holds what both subcommands share: the name, --dry-run, the printing and the
// cluster to apply to.
type common struct {
	// Name is the name of the object.
	Name string
	// DryRun is cmdutil.DryRunNone, cmdutil.DryRunClient or cmdutil.DryRunServer.
	DryRun cmdutil.DryRunStrategy
	// PrintFlags selects the output: one line per object by default, or -o.
	PrintFlags *genericclioptions.PrintFlags

	cmd *cobra.Command
	// Factory resolves the context and builds the client.
	Factory kube.Factory
	genericiooptions.IOStreams
}

func newCommon(f kube.Factory, streams genericiooptions.IOStreams) common {
	return common{
		DryRun:     cmdutil.DryRunNone,
		PrintFlags: genericclioptions.NewPrintFlags("created").WithTypeSetter(clientgoscheme.Scheme),
		Factory:    f,
		IOStreams:  streams,
	}
}

func (o *common) addFlags(cmd *cobra.Command) {
	cmdutil.AddDryRunFlag(cmd, `Must be "none", "client" or "server". "client" prints the object and contacts no cluster; "server" sends it as a server-side dry run, persisting nothing.`)
	o.PrintFlags.AddFlags(cmd)
}

// complete takes the name. The cluster is resolved by run, after validation, and only
// when it is needed.
func (o *common) complete(cmd *cobra.Command, args []string) error {
	o.cmd = cmd
	if len(args) > 0 {
		o.Name = args[0]
	}
	var err error
	o.DryRun, err = cmdutil.GetDryRunStrategy(cmd, cmdutil.DryRunNone, cmdutil.DryRunClient, cmdutil.DryRunServer)
	return err
}

// validate checks the shared flags. It does no I/O.
func (o *common) validate() []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("invalid NAME %q: %s", o.Name, strings.Join(msgs, "; ")))
	}
	if _, err := o.PrintFlags.ToPrinter(); err != nil {
		errs = append(errs, fmt.Errorf("--output: %w", err))
	}
	return errs
}

// run prints obj (--dry-run=client) or applies it and prints the outcome.
func (o *common) run(ctx context.Context, obj *unstructured.Unstructured) error {
	if o.DryRun == cmdutil.DryRunClient {
		return o.print(obj, "created (dry run)")
	}
	targets, err := o.Factory.Targets(o.cmd, nil)
	if err != nil {
		return err
	}
	t := targets[0]
	ctx, cancel := context.WithTimeout(ctx, serverapply.ContextTimeout)
	defer cancel()
	c, err := o.Factory.Client(t, kube.ClientOptions{Verb: "create", Timeout: serverapply.ContextTimeout, Warnings: o.ErrOut})
	if err != nil {
		return err
	}
	outcome, live, err := serverapply.Object(ctx, c, obj, o.DryRun == cmdutil.DryRunServer)
	if err != nil {
		return serverapply.Explain(err, obj, t)
	}
	op := string(outcome)
	if o.DryRun == cmdutil.DryRunServer {
		op += " (server dry run)"
	}
	if o.namesOnly() {
		return o.print(obj, op)
	}
	return o.print(live, op)
}

func (o *common) print(obj *unstructured.Unstructured, operation string) error {
	o.PrintFlags.NamePrintFlags.Operation = operation
	p, err := o.PrintFlags.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Out)
}

// namesOnly reports whether the output is one line per object ("" or -o name).
func (o *common) namesOnly() bool {
	f := ""
	if o.PrintFlags.OutputFormat != nil {
		f = strings.ToLower(*o.PrintFlags.OutputFormat)
	}
	return f == "" || f == "name"
}

// featureNamePattern is the pattern of ClusterFeature spec.featureName in the CRD: a
// label key.
var featureNamePattern = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// maxFeatureNameLength is the CRD's maxLength of spec.featureName.
const maxFeatureNameLength = 316

// validateFeatureName checks a feature name against the CRD's pattern and length.
func validateFeatureName(flag, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: the feature name must not be empty", flag)
	case len(name) > maxFeatureNameLength:
		return fmt.Errorf("%s %q: the feature name is longer than %d characters", flag, name, maxFeatureNameLength)
	case !featureNamePattern.MatchString(name):
		return fmt.Errorf("%s %q: a feature name is a label key: an optional DNS subdomain prefix and '/', then alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric", flag, name)
	}
	return nil
}

// toUnstructured turns a typed object into what a user would write: no status, no
// creationTimestamp, no empty objects.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	prune(m)
	if m["apiVersion"] == nil || m["kind"] == nil {
		return nil, errors.New("the object has no apiVersion or kind")
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// prune removes, recursively, the fields of m whose value is null or an empty object.
// Empty objects in lists are kept: there they mean something (e.g. a rule matching
// everything).
func prune(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
		}
	}
}
