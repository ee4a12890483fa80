package join

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/cmdutil"
	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// secretMask replaces each value of a printed Secret without --show-secrets.
const secretMask = "***"

// write applies the copies side by side, Secret before Cluster, and reports each object
// like kubectl does. With --dry-run nothing is written. When a write fails, the error
// lists what was written and what was not.
func (o *Options) write(ctx context.Context, p plan) error {
	suffix := ""
	switch o.DryRun {
	case cmdutil.DryRunClient:
		suffix = " (dry run)"
	case cmdutil.DryRunServer:
		suffix = " (server dry run)"
	}
	type printed struct {
		on  *side
		obj runtime.Object
	}
	var out []printed
	for _, s := range p.rejoin {
		if err := o.markRejoined(ctx, s); err != nil {
			return fmt.Errorf("recording on the Cluster %s on context %s that the clusters join again after a departure: %w\nnothing else was written", s.rejoin.Name, s.name, err)
		}
		if s.admits != "" {
			fmt.Fprintf(o.statusOut(), "%s/%s on %s recorded the departure of context %s: admission of it recorded%s\n", clusterResource, s.rejoin.Name, s.name, s.admits, suffix)
		} else {
			fmt.Fprintf(o.statusOut(), "%s/%s on %s had left the group: its record of its departure dropped%s\n", clusterResource, s.rejoin.Name, s.name, suffix)
		}
	}
	for wi, w := range p.writes {
		for ii, it := range w.items {
			obj, outcome, err := o.apply(ctx, w.on, it)
			if err != nil {
				return writeError(w.on, it, err, o.written, notDone(p, wi, ii))
			}
			line := fmt.Sprintf("%s %s on %s", resourceName(it.desired), outcome, w.on.name)
			o.written = append(o.written, line)
			if o.printer == nil {
				fmt.Fprintln(o.Out, line+suffix)
				continue
			}
			out = append(out, printed{on: w.on, obj: obj})
		}
	}
	if o.printer == nil {
		return nil
	}
	for _, x := range out {
		if !o.yamlOutput {
			if err := o.printer.PrintObj(x.obj, o.Out); err != nil {
				return err
			}
			continue
		}
		// One YAML stream, over every write of the run (join --legacy writes twice); a
		// comment names the side of the objects that follow.
		var buf bytes.Buffer
		if o.printedOn != nil {
			buf.WriteString("---\n")
		}
		if x.on != o.printedOn {
			fmt.Fprintf(&buf, "# on context %s\n", x.on.name)
			o.printedOn = x.on
		}
		if _, err := o.Out.Write(buf.Bytes()); err != nil {
			return err
		}
		// A fresh printer per object: the YAML printer adds its own separators.
		p, err := o.PrintFlags.ToPrinter()
		if err != nil {
			return err
		}
		if err := p.PrintObj(x.obj, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// apply writes one object (unless it is unchanged or in dry run) and returns what to
// print for it and the outcome.
func (o *Options) apply(ctx context.Context, on *side, it item) (runtime.Object, string, error) {
	u, err := toApply(it.desired)
	if err != nil {
		return nil, "", err
	}
	if o.DryRun == cmdutil.DryRunClient {
		return o.masked(u), it.outcome, nil
	}
	if it.outcome == "unchanged" {
		// Applying would change no field: do not write at all.
		return it.existing, it.outcome, nil
	}
	opts := []client.ApplyOption{client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership}
	if o.DryRun == cmdutil.DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := on.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return nil, "", err
	}
	outcome := it.outcome
	if it.existing != nil && o.DryRun == cmdutil.DryRunNone && u.GetResourceVersion() == it.existing.GetResourceVersion() {
		outcome = "unchanged"
	}
	return o.masked(u), outcome, nil
}

// masked returns u with the values of a Secret's data replaced by "***" (base64 of it in
// data), unless --show-secrets: printed reader kubeconfigs hold live tokens.
func (o *Options) masked(u *unstructured.Unstructured) *unstructured.Unstructured {
	if o.ShowSecrets || u.GetKind() != "Secret" {
		return u
	}
	u = u.DeepCopy()
	for _, field := range []string{"data", "stringData"} {
		m, found, _ := unstructured.NestedMap(u.Object, field)
		if !found {
			continue
		}
		for k := range m {
			if field == "data" {
				m[k] = base64.StdEncoding.EncodeToString([]byte(secretMask))
			} else {
				m[k] = secretMask
			}
		}
		_ = unstructured.SetNestedMap(u.Object, m, field)
	}
	return u
}

// markRejoined writes the rejoin marks on the local Cluster of a side (see
// rejoinMarks), before the copies are written.
func (o *Options) markRejoined(ctx context.Context, s *side) error {
	if o.DryRun == cmdutil.DryRunClient {
		return nil
	}
	opts := []client.PatchOption{client.FieldOwner(v1alpha1.FieldManager)}
	if o.DryRun == cmdutil.DryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	patch := map[string]any{"metadata": map[string]any{"annotations": s.marks}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return s.client.Patch(ctx, s.rejoin.DeepCopy(), client.RawPatch(types.MergePatchType, data), opts...)
}

// notDone lists the writes after item ii of side wi, which is the one that failed.
func notDone(p plan, wi, ii int) []string {
	var out []string
	for i := wi; i < len(p.writes); i++ {
		w := p.writes[i]
		for j, it := range w.items {
			if i == wi && j < ii {
				continue
			}
			out = append(out, fmt.Sprintf("%s on %s", resourceName(it.desired), w.on.name))
		}
	}
	return out
}

// writeError reports a failed write with what was and was not written.
func writeError(on *side, it item, err error, done, notDone []string) error {
	return unfinishedError(fmt.Sprintf("writing %s on context %s: %v", resourceName(it.desired), on.name, err), done, notDone)
}

// unfinishedError reports msg, which stopped join after it wrote done, with what it has
// not written.
func unfinishedError(msg string, done, notDone []string) error {
	var b strings.Builder
	b.WriteString(msg)
	if len(done) == 0 {
		b.WriteString("\nnothing was written")
	} else {
		b.WriteString("\nwritten: " + strings.Join(done, ", "))
	}
	b.WriteString("\nnot written: " + strings.Join(notDone, ", "))
	b.WriteString("\nrun the same join again to finish: it changes only what is missing")
	return errors.New(b.String())
}

// statusOut is where the lines that report --wait go: stdout, unless objects are
// printed there.
func (o *Options) statusOut() io.Writer {
	if o.printer != nil {
		return o.ErrOut
	}
	return o.Out
}
