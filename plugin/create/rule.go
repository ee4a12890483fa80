package create

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

const (
	ruleLong = `
		Create a ResourceSyncRule: sync the objects of one kind that match the flags from the
		group's peers to the cluster the rule is in.

		--kind (with --group, empty for the core group, and --version, v1 by default) is the
		kind of the objects. The other flags narrow what is synced, all of them ANDed:

		    --name NAME             the object with that name
		    --namespace-match NS    objects in that namespace; repeat it for several (ORed)
		    --label-selector SEL    objects whose labels match SEL (kubectl's -l syntax); repeat it for several selectors (ORed)
		    --feature F             only peers that have a ClusterFeature with featureName F are sources; repeat it for several (all must hold)

		--name with one --namespace-match writes an objectKey {name, namespace}, as the
		seed's rules do. Without any of them the rule syncs every object of the kind.

		--sync-disabled marks the rule itself with the resource-sync-disabled annotation, so
		that a rule synced from a peer is not synced back. --deletion-policy Delete deletes
		the copies when the rule is deleted (Retain, the default, keeps them).
		--create-namespaces creates a copy's missing namespace.`

	ruleExample = `
		# The seed's rule: sync the Secret cluster-registry/test-secret from every peer
		kubectl registry create rule test-secret-sink --kind Secret --name test-secret --namespace-match cluster-registry

		# Sync the Deployments labelled app=web in two namespaces, from peers offering "web"
		kubectl registry create rule web --group apps --kind Deployment --namespace-match prod --namespace-match staging \
		  --label-selector app=web --feature web --create-namespaces

		# Print the rule instead of creating it
		kubectl registry create rule test-secret-sink --kind Secret --name test-secret --namespace-match cluster-registry --dry-run=client -o yaml`
)

// RuleOptions holds the flags and the state of "kubectl registry create rule".
type RuleOptions struct {
	common

	Group           string
	Version         string
	Kind            string
	NamespaceMatch  []string
	ObjectName      string
	LabelSelectors  []string
	Features        []string
	SyncDisabled    bool
	DeletionPolicy  string
	CreateNamespace bool
}

// NewRuleOptions returns RuleOptions with the defaults of the flags.
func NewRuleOptions(f kube.Factory, streams genericiooptions.IOStreams) *RuleOptions {
	return &RuleOptions{
		common:  newCommon(f, streams),
		Version: "v1",
	}
}

// NewCmdCreateRule returns the "create rule" command.
func NewCmdCreateRule(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewRuleOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "rule NAME --kind KIND [--group G] [--version V] [--name OBJ] [--namespace-match NS]... [--label-selector SEL]... [--feature F]... [--dry-run=client|server] [-o yaml|json|name]",
		DisableFlagsInUseLine: true,
		Aliases:               []string{"rsr", "resourcesyncrule"},
		Short:                 "Create a ResourceSyncRule",
		Long:                  templates.LongDesc(ruleLong),
		Example:               templates.Examples(ruleExample),
		Args:                  nameArg,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of "create rule" to cmd.
func (o *RuleOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.Kind, "kind", o.Kind, "Kind of the objects to sync, e.g. Secret or Deployment (required).")
	fs.StringVar(&o.Group, "group", o.Group, "API group of the kind, e.g. apps; empty for the core group.")
	fs.StringVar(&o.Version, "version", o.Version, "API version of the kind.")
	fs.StringArrayVar(&o.NamespaceMatch, "namespace-match", o.NamespaceMatch, "Sync only objects in this namespace; repeat for several.")
	fs.StringVar(&o.ObjectName, "name", o.ObjectName, "Sync only the object with this name.")
	fs.StringArrayVar(&o.LabelSelectors, "label-selector", o.LabelSelectors, "Sync only objects whose labels match this selector (e.g. app=web,tier!=db); repeat for alternatives.")
	fs.StringArrayVar(&o.Features, "feature", o.Features, "Sync only from peers that have a ClusterFeature with this featureName; repeat for several (all must hold).")
	fs.BoolVar(&o.SyncDisabled, "sync-disabled", o.SyncDisabled, "Annotate the rule so that it is not itself synced to other clusters.")
	fs.StringVar(&o.DeletionPolicy, "deletion-policy", o.DeletionPolicy, "What happens to the copies when the rule is deleted: Retain (the default) or Delete.")
	fs.BoolVar(&o.CreateNamespace, "create-namespaces", o.CreateNamespace, "Create a copy's missing namespace instead of failing.")
	o.addFlags(cmd)
}

// Complete takes the name and resolves the cluster.
func (o *RuleOptions) Complete(cmd *cobra.Command, args []string) error {
	return o.complete(cmd, args)
}

// Validate checks the flags and builds the rule. It does no I/O.
func (o *RuleOptions) Validate() error {
	errs := o.validate()
	if _, err := o.Rule(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run applies or prints the rule.
func (o *RuleOptions) Run(ctx context.Context) error {
	obj, err := o.Object()
	if err != nil {
		return err
	}
	return o.run(ctx, obj)
}

// Object returns the rule as the user would write it.
func (o *RuleOptions) Object() (*unstructured.Unstructured, error) {
	rule, err := o.Rule()
	if err != nil {
		return nil, err
	}
	return toUnstructured(rule)
}

// Rule builds the ResourceSyncRule the flags describe, or explains what is wrong with
// them.
func (o *RuleOptions) Rule() (*v1alpha1.ResourceSyncRule, error) {
	errs := o.checkObjects()
	labels, labelErrs := o.labelSelectors()
	features, featureErrs := o.featureMatches()
	errs = append(append(errs, labelErrs...), featureErrs...)
	switch v1alpha1.DeletionPolicy(o.DeletionPolicy) {
	case "", v1alpha1.DeletionPolicyRetain, v1alpha1.DeletionPolicyDelete:
	default:
		errs = append(errs, fmt.Errorf("--deletion-policy must be Retain or Delete, got %q", o.DeletionPolicy))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	syncRule := o.syncRule(labels)
	rule := &v1alpha1.ResourceSyncRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ResourceSyncRule"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: v1alpha1.ResourceSyncRuleSpec{
			ClusterFeatureMatches: features,
			GVK:                   v1alpha1.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind},
			Rules:                 []v1alpha1.SyncRule{syncRule},
			DeletionPolicy:        v1alpha1.DeletionPolicy(o.DeletionPolicy),
			CreateNamespaces:      o.CreateNamespace,
		},
	}
	if o.SyncDisabled {
		rule.Annotations = map[string]string{v1alpha1.SyncDisabledAnnotation: "true"}
	}
	return rule, nil
}

// checkObjects checks the flags that say which objects the rule syncs: --kind, --group,
// --version, --namespace-match and --name.
func (o *RuleOptions) checkObjects() []error {
	var errs []error
	if err := validateKind(o.Kind); err != nil {
		errs = append(errs, err)
	}
	if o.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Group); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--group %q: %s", o.Group, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsDNS1123Label(o.Version); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--version %q: %s", o.Version, strings.Join(msgs, "; ")))
	}
	seen := map[string]bool{}
	for _, ns := range o.NamespaceMatch {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespace-match %q: %s", ns, strings.Join(msgs, "; ")))
		}
		if seen[ns] {
			errs = append(errs, fmt.Errorf("--namespace-match %q given twice", ns))
		}
		seen[ns] = true
	}
	if strings.Contains(o.ObjectName, "/") {
		errs = append(errs, fmt.Errorf("--name %q: an object name cannot contain '/'; use --namespace-match for the namespace", o.ObjectName))
	}
	return errs
}

// labelSelectors parses --label-selector, and says what is wrong with each selector it
// cannot parse.
func (o *RuleOptions) labelSelectors() ([]metav1.LabelSelector, []error) {
	var labels []metav1.LabelSelector
	var errs []error
	for _, s := range o.LabelSelectors {
		if strings.TrimSpace(s) == "" {
			errs = append(errs, errors.New("--label-selector: empty selector"))
			continue
		}
		sel, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--label-selector %q: %w", s, err))
			continue
		}
		labels = append(labels, *sel)
	}
	return labels, errs
}

// featureMatches returns the cluster features of --feature, and says what is wrong with
// each name that is not one.
func (o *RuleOptions) featureMatches() ([]v1alpha1.ClusterFeatureMatch, []error) {
	var features []v1alpha1.ClusterFeatureMatch
	var errs []error
	for _, f := range o.Features {
		if err := validateFeatureName("--feature", f); err != nil {
			errs = append(errs, err)
			continue
		}
		features = append(features, v1alpha1.ClusterFeatureMatch{FeatureName: f})
	}
	return features, errs
}

// syncRule is the rule's SyncRule: its match of the object name, namespaces and label
// selectors, if the flags give any.
func (o *RuleOptions) syncRule(labels []metav1.LabelSelector) v1alpha1.SyncRule {
	match := v1alpha1.SyncRuleMatch{Labels: labels}
	match.ObjectKey.Name = o.ObjectName
	switch len(o.NamespaceMatch) {
	case 0:
	case 1:
		match.ObjectKey.Namespace = o.NamespaceMatch[0]
	default:
		match.Namespaces = append([]string(nil), o.NamespaceMatch...)
	}
	var syncRule v1alpha1.SyncRule
	if match.ObjectKey != (v1alpha1.ObjectKey{}) || len(match.Namespaces) > 0 || len(match.Labels) > 0 {
		syncRule.Matches = []v1alpha1.SyncRuleMatch{match}
	}
	return syncRule
}

// validateKind checks that kind looks like a kind (Secret), not a resource (secrets).
func validateKind(kind string) error {
	if kind == "" {
		return errors.New("--kind is required, e.g. --kind Secret")
	}
	first := []rune(kind)[0]
	if !unicode.IsUpper(first) || strings.IndexFunc(kind, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) >= 0 {
		return fmt.Errorf("--kind %q: a kind is a CamelCase name such as Secret or Deployment, not a resource name", kind)
	}
	return nil
}
