// Package kube is the plugin's one client seam: every verb resolves its kubeconfig
// contexts and builds its clients through a Factory, so that the scheme, the client
// settings (timeout, rate limits, user agent, API server warnings) and the handling of
// --context/--contexts are written once, and so that a verb's Run can be tested against
// kubefake.Factory without API servers. The client-go part lives in package clientgo
// (which sync-diff uses alone); this package adds the controller-runtime client.
package kube

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube/clientgo"
)

// Rate limits of the plugin's clients (clientgo.QPS and clientgo.Burst).
const (
	QPS   = clientgo.QPS
	Burst = clientgo.Burst
)

// ErrNoKubeconfig is clientgo.ErrNoKubeconfig.
var ErrNoKubeconfig = clientgo.ErrNoKubeconfig

// Target is a cluster a verb works on (clientgo.Target).
type Target = clientgo.Target

// ClientOptions are a verb's settings of the clients it builds (clientgo.ClientOptions).
type ClientOptions = clientgo.ClientOptions

// Factory resolves kubeconfig contexts and builds clients, like kubectl's
// cmdutil.Factory: the client-go clients of clientgo.Factory and a controller-runtime
// client. NewFactory is the real one, kubefake.Factory the one for tests.
type Factory interface {
	clientgo.Factory
	// Client returns a controller-runtime client of t with NewScheme.
	Client(t Target, o ClientOptions) (client.Client, error)
}

// NewFactory returns the Factory of the root's kubeconfig flags.
func NewFactory(getter genericclioptions.RESTClientGetter) Factory {
	return &factory{Factory: clientgo.NewFactory(getter)}
}

type factory struct {
	clientgo.Factory
}

func (f *factory) Client(t Target, o ClientOptions) (client.Client, error) {
	c, err := client.New(Configure(t.Config, o), client.Options{Scheme: NewScheme(), Log: logr.Discard()})
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", t.Config.Host, err)
	}
	return c, nil
}

// NewScheme returns the scheme of every plugin client (clientgo.NewScheme).
func NewScheme() *k8sruntime.Scheme { return clientgo.NewScheme() }

// Configure returns a copy of cfg with the settings of o (clientgo.Configure).
func Configure(cfg *rest.Config, o ClientOptions) *rest.Config { return clientgo.Configure(cfg, o) }

// Resolve is clientgo.Resolve: the Targets of a Factory whose kubeconfig is raw and
// whose selected context's config is current.
func Resolve(cmd *cobra.Command, f Factory, contexts []string, current func() (*rest.Config, error)) ([]Target, error) {
	return clientgo.Resolve(cmd, f, contexts, current)
}

// ValidateContexts checks the names of --contexts (clientgo.ValidateContexts).
func ValidateContexts(contexts []string) error { return clientgo.ValidateContexts(contexts) }

// IsAPIStatus reports whether err is an answer of the API server (clientgo.IsAPIStatus).
func IsAPIStatus(err error) bool { return clientgo.IsAPIStatus(err) }

// ExplainAdmin adds what the user can do about an error of a verb that needs
// cluster-admin on t (clientgo.ExplainAdmin).
func ExplainAdmin(err error, t Target, doing string) error {
	return clientgo.ExplainAdmin(err, t, doing)
}
