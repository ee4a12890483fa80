// Package version implements "kubectl registry version": the build of the binary, read
// locally without a call to any API server.
package version

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/kubectl/pkg/util/templates"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
)

// binaryName starts the one-line output.
const binaryName = "kubectl-registry"

// outputFormats returns the formats accepted by --output; "" is the one-line summary.
func outputFormats() []string { return []string{"json", "yaml"} }

const (
	versionLong = `
		Print the version of kubectl-registry: release, commit, build date, Go version and
		platform. The same binary is the kubectl plugin and the in-cluster controller, so this
		is also the version of the controller image built from it.

		No API server is contacted, unless --contexts names contexts whose controllers'
		versions to show: each context's local Cluster reports its controller's version,
		and a warning (on stderr) names the controllers further apart from each other, or
		from this plugin, than the version skew the project supports (one minor version,
		docs/upgrade.md).`

	versionExample = `
		# Print the version on one line
		kubectl registry version

		# Print the version as JSON or YAML
		kubectl registry version -o json
		kubectl registry version -o yaml

		# Print the versions of the controllers of three members too
		kubectl registry version --contexts east,west,north`
)

// Options holds the flags and the state of "kubectl registry version".
type Options struct {
	// Output is the output format: "" (one line), "json" or "yaml".
	Output string
	// Info is the build to print; Complete fills it from buildinfo.Get.
	Info buildinfo.Info
	// Contexts are the contexts whose controllers' versions to show (--contexts).
	Contexts []string
	// Factory resolves the contexts and builds their clients.
	Factory kube.Factory

	cmd *cobra.Command

	genericiooptions.IOStreams
}

// NewOptions returns Options that write to streams and resolve the contexts of
// --contexts through f (nil when the controllers' versions are never asked for).
func NewOptions(f kube.Factory, streams genericiooptions.IOStreams) *Options {
	return &Options{Factory: f, IOStreams: streams}
}

// NewCmdVersion returns the "version" command. f is the Factory of the root command's
// kubeconfig flags.
func NewCmdVersion(f kube.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(f, streams)
	cmd := &cobra.Command{
		Use:                   "version [--contexts A,B,...] [-o json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Print the version of kubectl-registry",
		Long:                  templates.LongDesc(versionLong),
		Example:               templates.Examples(versionExample),
		Args:                  cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.cmd = cmd
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return cmdutil.UsageError(cmd, err)
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output,
		fmt.Sprintf("Output format. One of: (%s).", strings.Join(outputFormats(), ", ")))
	cmd.Flags().StringSliceVar(&o.Contexts, "contexts", o.Contexts,
		"Kubeconfig contexts whose controllers' versions to show too, comma-separated (each one's local Cluster reports it).")
	return cmd
}

// Complete reads the build information of the running binary.
func (o *Options) Complete(_ []string) error {
	o.Info = buildinfo.Get()
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	if o.Output != "" && !slices.Contains(outputFormats(), o.Output) {
		return fmt.Errorf("--output must be one of (%s), got %q", strings.Join(outputFormats(), ", "), o.Output)
	}
	return kube.ValidateContexts(o.Contexts)
}

// Run prints the version, and with --contexts the controllers' versions.
func (o *Options) Run(ctx context.Context) error {
	if len(o.Contexts) > 0 {
		return o.runControllers(ctx)
	}
	var out []byte
	switch o.Output {
	case "":
		out = []byte(binaryName + " " + o.Info.String() + "\n")
	case "json":
		b, err := json.MarshalIndent(o.Info, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the version as JSON: %w", err)
		}
		out = append(b, '\n')
	case "yaml":
		b, err := yaml.Marshal(o.Info)
		if err != nil {
			return fmt.Errorf("encoding the version as YAML: %w", err)
		}
		out = b
	default:
		return fmt.Errorf("unsupported output format %q", o.Output)
	}
	_, err := o.Out.Write(out)
	return err
}
