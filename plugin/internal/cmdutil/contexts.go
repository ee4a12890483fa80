package cmdutil

import (
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
)

// ContextOverrides returns the kubeconfig overrides for context that a verb working on
// several contexts applies to each of them: the context itself, and of the root's
// kubeconfig flags those that are not about one cluster or one user — --request-timeout
// and impersonation (--as, --as-uid, --as-group). An invalid --request-timeout makes the
// client config fail, as it does for kubectl.
func ContextOverrides(getter genericclioptions.RESTClientGetter, context string) *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{CurrentContext: context}
	f, ok := getter.(*genericclioptions.ConfigFlags)
	if !ok || f == nil {
		return o
	}
	if f.Timeout != nil && *f.Timeout != "0" {
		o.Timeout = *f.Timeout
	}
	if f.Impersonate != nil && *f.Impersonate != "" {
		o.AuthInfo.Impersonate = *f.Impersonate
	}
	if f.ImpersonateUID != nil && *f.ImpersonateUID != "" {
		o.AuthInfo.ImpersonateUID = *f.ImpersonateUID
	}
	if f.ImpersonateGroup != nil && len(*f.ImpersonateGroup) > 0 {
		o.AuthInfo.ImpersonateGroups = *f.ImpersonateGroup
	}
	return o
}
