package create

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	featureLong = `
		Create a ClusterFeature: mark the cluster it is in as offering a feature, which makes
		the cluster a source of the ResourceSyncRules of its peers whose clusterFeatureMatch
		selects the feature (by --feature, the featureName, or by the --label labels).`

	featureExample = `
		# The seed's feature
		kubectl registry create feature test-secret-source --feature test-secret-feature

		# A feature with labels, printed instead of created
		kubectl registry create feature web --feature example.com/web --label tier=frontend --dry-run=client -o yaml`
)

// FeatureOptions holds the flags and the state of "kubectl registry create feature".
type FeatureOptions struct {
	common

	// FeatureName is spec.featureName.
	FeatureName string
	// Labels are "key=value" labels of the ClusterFeature.
	Labels []string
}

// NewFeatureOptions returns FeatureOptions with the defaults of the flags.
func NewFeatureOptions(f kube.Factory, streams genericiooptions.IOStreams) *FeatureOptions {
	return &FeatureOptions{common: newCommon(f, streams)}
}

// NewCmdCreateFeature returns the "create feature" command.
func NewCmdCreateFeature(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewFeatureOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "feature NAME --feature FEATURENAME [--label KEY=VALUE]... [--dry-run=client|server] [-o yaml|json|name]",
		DisableFlagsInUseLine: true,
		Aliases:               []string{"cf", "clusterfeature"},
		Short:                 "Create a ClusterFeature",
		Long:                  templates.LongDesc(featureLong),
		Example:               templates.Examples(featureExample),
		Args:                  nameArg,
		RunE:                  cmdutil.RunE(o),
	}
	o.AddFlags(cmd)
	return cmd
}

// AddFlags adds the flags of "create feature" to cmd.
func (o *FeatureOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.FeatureName, "feature", o.FeatureName, "The feature name (spec.featureName) rules select, a label key such as my-feature or example.com/my-feature (required).")
	fs.StringArrayVar(&o.Labels, "label", o.Labels, "A label KEY=VALUE of the ClusterFeature, matched by clusterFeatureMatch's selectors; repeat for several.")
	o.addFlags(cmd)
}

// Complete takes the name and resolves the cluster.
func (o *FeatureOptions) Complete(cmd *cobra.Command, args []string) error {
	return o.complete(cmd, args)
}

// Validate checks the flags and builds the feature. It does no I/O.
func (o *FeatureOptions) Validate() error {
	errs := o.validate()
	if _, err := o.Feature(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run applies or prints the feature.
func (o *FeatureOptions) Run(ctx context.Context) error {
	obj, err := o.Object()
	if err != nil {
		return err
	}
	return o.run(ctx, obj)
}

// Object returns the feature as the user would write it.
func (o *FeatureOptions) Object() (*unstructured.Unstructured, error) {
	f, err := o.Feature()
	if err != nil {
		return nil, err
	}
	return toUnstructured(f)
}

// Feature builds the ClusterFeature the flags describe, or explains what is wrong with
// them.
func (o *FeatureOptions) Feature() (*v1alpha1.ClusterFeature, error) {
	var errs []error
	if o.FeatureName == "" {
		errs = append(errs, errors.New("--feature is required: the feature name rules select"))
	} else if err := validateFeatureName("--feature", o.FeatureName); err != nil {
		errs = append(errs, err)
	}
	var labels map[string]string
	for _, l := range o.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("--label %q: want KEY=VALUE", l))
			continue
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--label %q: invalid key: %s", l, strings.Join(msgs, "; ")))
			continue
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--label %q: invalid value: %s", l, strings.Join(msgs, "; ")))
			continue
		}
		if _, dup := labels[k]; dup {
			errs = append(errs, fmt.Errorf("--label: key %q given twice", k))
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &v1alpha1.ClusterFeature{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ClusterFeature"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Spec:       v1alpha1.ClusterFeatureSpec{FeatureName: o.FeatureName},
	}, nil
}
