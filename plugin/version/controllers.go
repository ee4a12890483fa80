package version

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-registry/kubectl-registry/plugin/internal/kube"
	"github.com/kubectl-registry/kubectl-registry/reconciler/buildinfo"
)

// requestTimeout bounds each context's reads.
const requestTimeout = 10 * time.Second

// Controller is the version the controller of one context reports on its local Cluster.
type Controller struct {
	Context string `json:"context"`
	// Cluster is the name of the context's local Cluster; empty when it has none yet.
	Cluster string `json:"cluster,omitempty"`
	// Version is the controller's version; empty when it reports none (the seed's
	// controller, a version older than the report, or none running yet).
	Version string `json:"version,omitempty"`
	// Error is why the context could not be read.
	Error string `json:"error,omitempty"`
}

// Versions is the document of version --contexts -o json|yaml.
type Versions struct {
	Client      buildinfo.Info `json:"client"`
	Controllers []Controller   `json:"controllers"`
}

// runControllers reads the controllers' versions of the contexts in parallel and prints
// them, with a warning for each pair further apart than the supported skew. A context
// that could not be read is an error of the command (exit code 1) after the others are
// printed.
func (o *Options) runControllers(ctx context.Context) error {
	targets, err := o.Factory.Targets(o.cmd, o.Contexts)
	if err != nil {
		return err
	}
	doc := Versions{Client: o.Info, Controllers: make([]Controller, len(targets))}
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { doc.Controllers[i] = o.readController(ctx, t) })
	}
	wg.Wait()
	switch o.Output {
	case "json":
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the versions as JSON: %w", err)
		}
		if _, err := o.Out.Write(append(b, '\n')); err != nil {
			return err
		}
	case "yaml":
		b, err := yaml.Marshal(doc)
		if err != nil {
			return fmt.Errorf("encoding the versions as YAML: %w", err)
		}
		if _, err := o.Out.Write(b); err != nil {
			return err
		}
	default:
		fmt.Fprintf(o.Out, "%s %s\n\n", binaryName, o.Info.String())
		w := printers.GetNewTabWriter(o.Out)
		fmt.Fprintln(w, "CONTEXT\tCLUSTER\tCONTROLLER")
		for _, c := range doc.Controllers {
			version := c.Version
			switch {
			case c.Error != "":
				version = "?"
			case version == "":
				version = "<none>"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", c.Context, orNone(c.Cluster), version)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for _, warning := range skew(doc) {
		fmt.Fprintf(o.ErrOut, "Warning: %s\n", warning)
	}
	var errs []error
	for _, c := range doc.Controllers {
		if c.Error != "" {
			errs = append(errs, errors.New(c.Error))
		}
	}
	return errors.Join(errs...)
}

// readController reads the local Cluster of t.
func (o *Options) readController(ctx context.Context, t kube.Target) Controller {
	c := Controller{Context: t.Name}
	m, err := kube.ConnectMember(ctx, o.Factory, t, kube.ClientOptions{Verb: "version", Timeout: requestTimeout, Warnings: o.ErrOut}, requestTimeout)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if m.Own != nil {
		c.Cluster, c.Version = m.Own.Name, m.Own.Status.ControllerVersion
	}
	return c
}

// skew says which controllers are further apart than the supported skew from this
// plugin or from each other.
func skew(doc Versions) []string {
	var out []string
	for i, a := range doc.Controllers {
		if err := buildinfo.Skew(doc.Client.Version, a.Version); err != nil {
			out = append(out, fmt.Sprintf("this plugin and the controller of %s: %v", a.Context, err))
		}
		for _, b := range doc.Controllers[i+1:] {
			if err := buildinfo.Skew(a.Version, b.Version); err != nil {
				out = append(out, fmt.Sprintf("the controllers of %s and %s: %v", a.Context, b.Context, err))
			}
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
