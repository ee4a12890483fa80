package status

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// watch prints the view, then again whenever what it shows changes, until ctx ends.
// Errors are printed on stderr when they differ from the last ones; the watch goes on.
func (o *Options) watch(ctx context.Context) error {
	var sources []cmdutil.WatchSource
	for _, t := range o.targets {
		srcs, err := o.watchSources(t)
		if err != nil {
			return fmt.Errorf("watching context %s: %w", t.Name, err)
		}
		sources = append(sources, srcs...)
	}
	frames := cmdutil.NewRedrawer(o.Out)
	lastErr := ""
	return cmdutil.WatchAndRedraw(ctx, sources, func(ctx context.Context) error {
		var out, errOut bytes.Buffer
		err := o.runOnce(ctx, &out, &errOut)
		if ctx.Err() != nil {
			return nil // ending: print nothing half read
		}
		msg := errOut.String()
		if err != nil && err.Error() != "" {
			msg += "error: " + err.Error() + "\n"
		}
		if msg != lastErr {
			lastErr = msg
			fmt.Fprint(o.ErrOut, msg)
		}
		if out.Len() == 0 {
			return nil
		}
		return frames.Draw(out.String())
	})
}

// watchSources are the watches of one context: its Clusters and ResourceSyncRules and,
// with --events, its warning events.
func (o *Options) watchSources(t target) ([]cmdutil.WatchSource, error) {
	// A watch lasts; each open is bounded below.
	dc, err := o.Factory.Dynamic(t.Target, kube.ClientOptions{Verb: "status", Watch: true})
	if err != nil {
		return nil, err
	}
	open := func(gvr schema.GroupVersionResource, opts metav1.ListOptions) cmdutil.WatchSource {
		return func(ctx context.Context) (watch.Interface, error) {
			// List first, so that the watch starts at the current state instead of
			// replaying every object.
			listCtx, cancel := context.WithTimeout(ctx, o.Timeout)
			defer cancel()
			list, err := dc.Resource(gvr).List(listCtx, metav1.ListOptions{FieldSelector: opts.FieldSelector, Limit: 1})
			if err != nil {
				return nil, err
			}
			w := opts
			w.ResourceVersion = list.GetResourceVersion()
			w.AllowWatchBookmarks = true
			return dc.Resource(gvr).Watch(ctx, w)
		}
	}
	sources := []cmdutil.WatchSource{
		open(v1alpha1.GroupVersion.WithResource("clusters"), metav1.ListOptions{}),
		open(v1alpha1.GroupVersion.WithResource("resourcesyncrules"), metav1.ListOptions{}),
	}
	if o.Events {
		sources = append(sources, open(corev1.SchemeGroupVersion.WithResource("events"),
			metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("type", corev1.EventTypeWarning).String()}))
	}
	return sources, nil
}
