// Package clientgo is the part of the plugin's client seam built on client-go alone:
// Targets (kubeconfig contexts and their REST configs), the settings of every client
// (timeout, rate limits, user agent, API server warnings), the handling of
// --context/--contexts, and a Factory of dynamic, typed and discovery clients. sync-diff
// uses it directly, so that the preview links no controller runtime (no
// controller-runtime, informers or leader election); package kube adds the
// controller-runtime client the other verbs use.
package clientgo

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
)

// Rate limits of the plugin's clients: client-go's default (5 requests/s) makes polls
// queue behind each other; the API server's priority and fairness protects it anyway.
const (
	QPS   = 50
	Burst = 100
)

// ErrNoKubeconfig is returned when no kubeconfig is found, instead of letting client-go
// fall back to its legacy default server (http://localhost:8080).
var ErrNoKubeconfig = errors.New("no kubeconfig found: pass --kubeconfig (and --context), or set KUBECONFIG")

// NewScheme returns the scheme of every plugin client: client-go's kinds, the
// apiextensions v1 kinds and the registry's API.
func NewScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Target is a cluster a verb works on: a kubeconfig context and its REST config.
type Target struct {
	// Name is the context, as messages show it (the server when no context is selected).
	Name string
	// Context is the kubeconfig context; "" is the one the kubeconfig flags select.
	Context string
	// Config is the REST config of the context, with the root's --request-timeout and
	// impersonation flags applied.
	Config *rest.Config
}

// ClientOptions are a verb's settings of the clients it builds.
type ClientOptions struct {
	// Verb names the command in the user agent.
	Verb string
	// Timeout, when positive, bounds every request (a shorter --request-timeout wins).
	Timeout time.Duration
	// Warnings, when set, receives the API server's warnings, deduplicated, as kubectl
	// prints them.
	Warnings io.Writer
	// Watch makes clients that watch: no request timeout (the caller bounds each open)
	// and no warnings; Timeout and Warnings are then ignored.
	Watch bool
}

// Factory resolves kubeconfig contexts and builds client-go clients, like kubectl's
// cmdutil.Factory. NewFactory is the real one; kube.Factory adds a controller-runtime
// client, and kubefake.Factory is the one for tests.
type Factory interface {
	// RawConfig returns the merged kubeconfig.
	RawConfig() (clientcmdapi.Config, error)
	// ExplicitFile returns the file of --kubeconfig, or "".
	ExplicitFile() string
	// Targets resolves the clusters of a verb that works on the contexts named by
	// --contexts, or without them on the one the kubeconfig flags select. --context
	// with --contexts, and a context the kubeconfig lacks, are usage errors of cmd. It
	// contacts no API server.
	Targets(cmd *cobra.Command, contexts []string) ([]Target, error)
	// Target returns the cluster of a context of the kubeconfig, by name.
	Target(context string) (Target, error)
	// Dynamic returns a dynamic client of t.
	Dynamic(t Target, o ClientOptions) (dynamic.Interface, error)
	// Kubernetes returns a typed client-go clientset of t.
	Kubernetes(t Target, o ClientOptions) (kubernetes.Interface, error)
	// Discovery returns a discovery client of t (for RESTMappers and resource lists).
	Discovery(t Target, o ClientOptions) (discovery.DiscoveryInterface, error)
}

// NewFactory returns the Factory of the root's kubeconfig flags.
func NewFactory(getter genericclioptions.RESTClientGetter) Factory {
	return &factory{getter: getter}
}

type factory struct {
	getter genericclioptions.RESTClientGetter
}

func (f *factory) RawConfig() (clientcmdapi.Config, error) {
	raw, err := f.getter.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return clientcmdapi.Config{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	return raw, nil
}

func (f *factory) ExplicitFile() string {
	return f.getter.ToRawKubeConfigLoader().ConfigAccess().GetExplicitFile()
}

// contextFlag returns the value of the root's --context.
func contextFlag(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	if fl := cmd.Flag("context"); fl != nil {
		return fl.Value.String()
	}
	return ""
}

func (f *factory) Targets(cmd *cobra.Command, contexts []string) ([]Target, error) {
	loader := f.getter.ToRawKubeConfigLoader()
	files := ""
	if precedence := loader.ConfigAccess().GetLoadingPrecedence(); len(precedence) > 0 {
		files = " (" + strings.Join(precedence, ", ") + ")"
	}
	return resolve(cmd, f, contexts, files, func() (*rest.Config, error) {
		cfg, err := f.getter.ToRESTConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		return cfg, nil
	})
}

// resolve is Targets over any Factory: current returns the REST config the kubeconfig
// flags select.
func resolve(cmd *cobra.Command, f Factory, contexts []string, files string, current func() (*rest.Config, error)) ([]Target, error) {
	flag := contextFlag(cmd)
	if len(contexts) > 0 && flag != "" {
		return nil, cmdutil.UsageErrorf(cmd, "--context and --contexts cannot be used together")
	}
	raw, err := f.RawConfig()
	if err != nil {
		return nil, err
	}
	if len(contexts) == 0 {
		name := flag
		if name != "" {
			if _, ok := raw.Contexts[name]; !ok {
				return nil, cmdutil.UsageErrorf(cmd, "--context %q: no such context in the kubeconfig%s", name, files)
			}
		} else {
			name = raw.CurrentContext
		}
		cfg, err := current()
		if err != nil {
			return nil, err
		}
		if cfg.Host == clientcmd.ClusterDefaults.Server && len(raw.Clusters) == 0 {
			return nil, ErrNoKubeconfig
		}
		t := Target{Name: name, Context: flag, Config: cfg}
		if name == "" {
			t.Name = cfg.Host
		}
		return []Target{t}, nil
	}
	targets := make([]Target, 0, len(contexts))
	for _, name := range contexts {
		if _, ok := raw.Contexts[name]; !ok {
			return nil, cmdutil.UsageErrorf(cmd, "--contexts: no context %q in the kubeconfig%s", name, files)
		}
		t, err := f.Target(name)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

func (f *factory) Target(name string) (Target, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.ExplicitFile()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, cmdutil.ContextOverrides(f.getter, name)).ClientConfig()
	if err != nil {
		return Target{}, fmt.Errorf("loading the kubeconfig of context %s: %w", name, err)
	}
	return Target{Name: name, Context: name, Config: cfg}, nil
}

// Configure returns a copy of cfg with the settings of o: the request timeout, the
// rate limits, the warning writer and the user agent naming the verb.
func Configure(cfg *rest.Config, o ClientOptions) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if o.Timeout > 0 && (cfg.Timeout == 0 || cfg.Timeout > o.Timeout) {
		cfg.Timeout = o.Timeout
	}
	if o.Watch {
		cfg.Timeout = 0
		cfg.WarningHandler = rest.NoWarnings{}
		o.Warnings = nil
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = QPS, Burst
	}
	if o.Warnings != nil {
		cfg.WarningHandler = rest.NewWarningWriter(o.Warnings, rest.WarningWriterOptions{Deduplicate: true})
	}
	info := buildinfo.Get()
	cfg.UserAgent = fmt.Sprintf("kubectl-registry/%s (%s/%s) %s", info.Version, runtime.GOOS, runtime.GOARCH, o.Verb)
	return cfg
}

func (f *factory) Dynamic(t Target, o ClientOptions) (dynamic.Interface, error) {
	c, err := dynamic.NewForConfig(Configure(t.Config, o))
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", t.Config.Host, err)
	}
	return c, nil
}

func (f *factory) Kubernetes(t Target, o ClientOptions) (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(Configure(t.Config, o))
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", t.Config.Host, err)
	}
	return c, nil
}

func (f *factory) Discovery(t Target, o ClientOptions) (discovery.DiscoveryInterface, error) {
	c, err := discovery.NewDiscoveryClientForConfig(Configure(t.Config, o))
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", t.Config.Host, err)
	}
	return c, nil
}

// Resolve is the Targets of a Factory whose kubeconfig is raw and whose selected
// context's config is current; fakes use it to resolve exactly as NewFactory does.
func Resolve(cmd *cobra.Command, f Factory, contexts []string, current func() (*rest.Config, error)) ([]Target, error) {
	return resolve(cmd, f, contexts, "", current)
}

// ValidateContexts checks the names of --contexts: none empty, none twice. Every verb
// that takes --contexts says the same.
func ValidateContexts(contexts []string) error {
	seen := map[string]bool{}
	for _, c := range contexts {
		if c == "" {
			return errors.New("--contexts: empty context name")
		}
		if seen[c] {
			return fmt.Errorf("--contexts: context %q named twice", c)
		}
		seen[c] = true
	}
	return nil
}
