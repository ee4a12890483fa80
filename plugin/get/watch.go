package get

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
)

// watch prints the result, then prints it again whenever an object of the listed
// resources changes on a cluster searched, until ctx ends. Errors are printed on stderr
// when they differ from the last ones; the watch goes on.
func (o *Options) watch(ctx context.Context) error {
	results := o.query(ctx)
	sources, err := o.watchSources(results)
	if err != nil {
		return err
	}
	if len(sources) == 0 {
		// Nothing to watch: print once, like without --watch.
		return o.print(results)
	}
	frames := cmdutil.NewRedrawer(o.Out)
	lastErr := ""
	first := true
	return cmdutil.WatchAndRedraw(ctx, sources, func(ctx context.Context) error {
		if !first {
			results = o.query(ctx)
		}
		first = false
		if ctx.Err() != nil {
			return nil // ending: print nothing half read
		}
		var out, errOut bytes.Buffer
		frame := *o
		frame.Out, frame.ErrOut = &out, &errOut
		err := frame.print(results)
		msg := errOut.String()
		if err != nil && err.Error() != "" {
			msg += "error: " + err.Error() + "\n"
		}
		if msg != lastErr {
			lastErr = msg
			fmt.Fprint(o.ErrOut, msg)
		}
		// An empty frame too: on a terminal it clears what is gone (the note that
		// nothing was found goes to stderr, as without --watch).
		return frames.Draw(out.String())
	})
}

// watchSources are the watches of every resource listed on every cluster searched, with
// the namespace and selectors of the listing.
func (o *Options) watchSources(results []*clusterResult) ([]cmdutil.WatchSource, error) {
	var sources []cmdutil.WatchSource
	for i, r := range results {
		if r.err != nil || r.skip || r.conn == nil {
			continue
		}
		// A watch lasts (a Watch client has no request timeout); each list is bounded
		// by --cluster-timeout.
		dc, err := o.Factory.Dynamic(r.conn.target, kube.ClientOptions{Verb: "get", Watch: true})
		if err != nil {
			return nil, fmt.Errorf("watching cluster %s: %w", r.cluster, err)
		}
		for _, table := range r.tables {
			if table == nil {
				continue
			}
			res := dynamic.ResourceInterface(dc.Resource(table.mapping.Resource))
			if table.mapping.Scope.Name() == meta.RESTScopeNameNamespace && !o.AllNamespaces {
				res = dc.Resource(table.mapping.Resource).Namespace(o.targets[i].namespace)
			}
			opts := metav1.ListOptions{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector}
			sources = append(sources, func(ctx context.Context) (watch.Interface, error) {
				// List first, so that the watch starts at the current state instead of
				// replaying every object.
				listCtx, cancel := context.WithTimeout(ctx, o.ClusterTimeout)
				defer cancel()
				list, err := res.List(listCtx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, Limit: 1})
				if err != nil {
					return nil, err
				}
				w := opts
				w.ResourceVersion = list.GetResourceVersion()
				w.AllowWatchBookmarks = true
				return res.Watch(ctx, w)
			})
		}
	}
	return sources, nil
}
