// Command registry-demo is `make demo`: it starts three real Kubernetes API servers on
// loopback (the test bed: etcd, kube-apiserver and kube-controller-manager each, built
// from the Go module proxy), runs `kubectl-registry serve` for each, installs the registry
// and joins the clusters with the plugin, syncs the seed's example Secret with the seed's
// ResourceSyncRule, and prints how to use the group. Ctrl-C stops everything; --check
// exits once the Secret is on all three clusters (what CI runs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
}

type demo struct {
	bin, kubectl, seeds string
	kubeconfig          string
	logs                string
	out                 io.Writer
	// procs are the controllers running, one per cluster.
	procs []*exec.Cmd
}

// run starts three clusters, forms a group of them, syncs the seed's example Secret
// across it, shows the group, and then (without --check) waits for Ctrl-C.
func run() error {
	bin := flag.String("bin", "bin/kubectl-registry", "the kubectl-registry binary (make build)")
	seeds := flag.String("seeds", "testdata/seed", "directory of the seed's example YAML")
	check := flag.Bool("check", false, "exit once the example Secret is on every cluster (non-interactive, for CI)")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long each step may take")
	flag.Parse()

	assets, ok := testbed.Assets()
	if !ok {
		return errors.New("the test API server binaries are missing: run make testbin (make demo does)")
	}
	binPath, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binPath); err != nil {
		return fmt.Errorf("%s: %w (run make build)", *bin, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	names := []string{"alpha", "beta", "gamma"}
	step("starting three API servers on loopback (%s)", strings.Join(names, ", "))
	startCtx, cancel := context.WithTimeout(ctx, *timeout)
	bed, err := testbed.Start(startCtx, testbed.Options{Names: names})
	cancel()
	if err != nil {
		return fmt.Errorf("starting the clusters: %w", err)
	}
	defer func() {
		step("stopping the clusters")
		_ = bed.Stop()
	}()
	d := &demo{bin: binPath, kubectl: filepath.Join(assets, "kubectl"), seeds: *seeds, kubeconfig: bed.KubeconfigPath, logs: bed.Dir, out: os.Stdout}
	defer d.stopControllers()
	if err := d.formGroup(ctx, names, *timeout); err != nil {
		return err
	}
	if err := d.syncExample(ctx, names, *timeout); err != nil {
		return err
	}
	d.show(ctx, names)
	if *check {
		step("check passed: test-secret is on %s", strings.Join(names, ", "))
		return nil
	}
	d.printNextSteps()
	<-ctx.Done()
	return nil
}

// formGroup installs the controller on every cluster, runs a controller for each (they
// stop with stopControllers), waits for each to report its Cluster Ready, and joins the
// others to the first.
func (d *demo) formGroup(ctx context.Context, names []string, timeout time.Duration) error {
	for _, n := range names {
		step("kubectl registry install --context %s --cluster-name %s", n, n)
		if err := d.plugin(ctx, "install", "--context", n, "--cluster-name", n); err != nil {
			return err
		}
	}
	for _, n := range names {
		step("kubectl registry serve --context %s (log: %s)", n, filepath.Join(d.logs, "serve-"+n+".log"))
		p, err := d.serve(n)
		if err != nil {
			return err
		}
		d.procs = append(d.procs, p)
	}
	for _, n := range names {
		step("waiting for the controller of %s to report its Cluster Ready", n)
		if err := d.waitFor(ctx, timeout, "--context", n, "get", "cluster", n, "-o", "jsonpath={.status.state}"); err != nil {
			return err
		}
	}
	for _, peer := range names[1:] {
		step("kubectl registry join --context %s --peer-context %s", names[0], peer)
		if err := d.plugin(ctx, "join", "--context", names[0], "--peer-context", peer, "--allow-loopback", "--wait", "--timeout", timeout.String()); err != nil {
			return err
		}
	}
	return nil
}

// stopControllers stops the controllers formGroup started and waits for them.
func (d *demo) stopControllers() {
	for _, p := range d.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range d.procs {
		_, _ = p.Process.Wait()
	}
}

// syncExample creates the seed's test-secret on the last cluster and its
// ResourceSyncRule on the first, waits for the Secret on every cluster, then gives the
// rule's and the Clusters' conditions a few seconds to settle.
func (d *demo) syncExample(ctx context.Context, names []string, timeout time.Duration) error {
	step("creating the seed's test-secret on %s and the seed's ResourceSyncRule on %s", names[2], names[0])
	if err := d.kubectlRun(ctx, "--context", names[2], "apply", "-n", "cluster-registry", "-f", filepath.Join(d.seeds, "test-secret.yaml")); err != nil {
		return err
	}
	if err := d.kubectlRun(ctx, "--context", names[0], "apply", "-f", filepath.Join(d.seeds, "resourcesyncrule-test-secret-sink.yaml")); err != nil {
		return err
	}
	step("waiting for test-secret on every cluster")
	deadline := time.Now().Add(timeout)
	for _, n := range names {
		for {
			if err := d.kubectlQuiet(ctx, "--context", n, "get", "secret", "-n", "cluster-registry", "test-secret"); err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("test-secret did not reach %s within %s (controller logs in %s)", n, timeout, d.logs)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	for _, n := range names {
		// The rule's status and every Cluster's ClustersSynced settle within seconds.
		_ = d.waitForValue(ctx, 30*time.Second, "True", "--context", n, "get", "rsr", "test-secret-sink", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		for _, m := range names {
			_ = d.waitForValue(ctx, 30*time.Second, "True", "--context", n, "get", "cluster", m, "-o", `jsonpath={.status.conditions[?(@.type=="ClustersSynced")].status}`)
		}
	}
	return nil
}

// show prints the Clusters, rules and the example Secret of every cluster.
func (d *demo) show(ctx context.Context, names []string) {
	for _, n := range names {
		fmt.Fprintf(d.out, "\n--- %s: kubectl get clusters,resourcesyncrules; kubectl get secret test-secret -n cluster-registry\n", n)
		_ = d.kubectlRun(ctx, "--context", n, "get", "clusters,resourcesyncrules")
		_ = d.kubectlRun(ctx, "--context", n, "get", "secret", "-n", "cluster-registry", "test-secret", "-L", v1alpha1.OwnershipLabel)
	}
}

// printNextSteps prints what to try on the running group, and where the logs are.
func (d *demo) printNextSteps() {
	fmt.Fprintf(d.out, `
The group is up. In another terminal:

  export KUBECONFIG=%s
  export PATH=%s:$PATH      # kubectl from the test bed, and the plugin
  kubectl config get-contexts
  kubectl --context beta get clusters -o wide
  kubectl --context alpha get rsr test-secret-sink -o yaml
  kubectl registry status --contexts alpha,beta,gamma
  kubectl registry get secrets -n cluster-registry
  kubectl registry sync-diff --membership
  kubectl registry leave gamma --context alpha --wait     # and back:
  kubectl registry join --context gamma --peer-context beta --allow-loopback --wait

Controller logs: %s/serve-*.log. Press Ctrl-C to stop everything.
`, d.kubeconfig, strings.Join([]string{filepath.Dir(d.kubectl), filepath.Dir(d.bin)}, ":"), d.logs)
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}

func (d *demo) plugin(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, d.bin, append(args, "--kubeconfig", d.kubeconfig)...)
	cmd.Stdout, cmd.Stderr = d.out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl registry %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (d *demo) serve(name string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(d.logs, "serve-"+name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.bin, "serve", "--kubeconfig", d.kubeconfig, "--context", name, "--cluster-name", name,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--peer-health-interval", "1s", "--allow-loopback-peers")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting serve for %s: %w", name, err)
	}
	return cmd, nil
}

func (d *demo) kubectlRun(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, d.kubectl, append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = d.out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// waitFor polls kubectl until it prints Ready.
func (d *demo) waitFor(ctx context.Context, timeout time.Duration, args ...string) error {
	return d.waitForValue(ctx, timeout, "Ready", args...)
}

// waitForValue polls kubectl until it prints want.
func (d *demo) waitForValue(ctx context.Context, timeout time.Duration, want string, args ...string) error {
	deadline := time.Now().Add(timeout)
	for {
		out, _ := exec.CommandContext(ctx, d.kubectl, append([]string{"--kubeconfig", d.kubeconfig}, args...)...).Output()
		if strings.TrimSpace(string(out)) == want {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubectl %s: not %s within %s (controller logs in %s)", strings.Join(args, " "), want, timeout, d.logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (d *demo) kubectlQuiet(ctx context.Context, args ...string) error {
	return exec.CommandContext(ctx, d.kubectl, append([]string{"--kubeconfig", d.kubeconfig}, args...)...).Run()
}
