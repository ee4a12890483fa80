package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/testbed"
)

// group is one set of clusters with a controller each, joined into a registry group, with
// the bench's rule (ConfigMaps of namespace bench) applied on the first cluster, the origin.
type group struct {
	b     *bench
	label string
	names []string
	// kcm: the clusters run kube-controller-manager. Without it the bench does the one
	// thing of it the registry needs, ClusterRole aggregation (aggregateClusterRoles).
	kcm     bool
	profile bool
	// profileStart: the profiled controllers profile their CPU from their start, until
	// the first stopProfiles (--mode peers: the first sync, the restart).
	profileStart bool
	bed          *testbed.Bed
	kubeconfig   string
	logs         string
	cs           map[string]kubernetes.Interface
	ctrls        []*controller
	setupTime    time.Duration
	// stops counts stopControllers, whose controllers' logs are kept as serve-NAME.log.stopN.
	stops int
	// apiPIDs are the API servers' processes, found when first read (cost.go).
	apiPIDs map[string]int
	// serveArgs are added to the controllers' flags (after the bench's own, so they win).
	serveArgs []string
}

type controller struct {
	name    string
	cmd     *exec.Cmd
	metrics string // https://127.0.0.1:PORT/metrics
	// scraper reads metrics as an in-cluster Prometheus does: a ServiceAccount token
	// that the controller has the API server authenticate and authorize.
	scraper *testbed.MetricsScraper
	profile string // path prefix of the profiles (--profile), or ""
	log     string // the file its output goes to
	// done is closed when the process has exited, with exitErr.
	done    chan struct{}
	exitErr error
}

// exited reports whether the controller's process has exited, and how.
func (c *controller) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.exitErr
	default:
		return false, nil
	}
}

// startGroup starts the clusters of a group (not the controllers: see setup).
func (b *bench) startGroup(ctx context.Context, label string, names []string, kcm bool) (*group, error) {
	what := "with kube-controller-manager"
	if !kcm {
		what = "without kube-controller-manager"
	}
	step("[%s] starting %d API servers on loopback (%s), %s", label, len(names), strings.Join(names, ", "), what)
	// Several API servers starting at once on two cores can take longer than the testbed's
	// default; the timeout grows with the group.
	startCtx, cancel := context.WithTimeout(ctx, b.o.timeout+time.Duration(len(names))*20*time.Second)
	defer cancel()
	t0 := time.Now()
	bed, err := testbed.Start(startCtx, testbed.Options{Names: names, NoControllerManager: !kcm})
	if err != nil {
		return nil, fmt.Errorf("[%s] starting the clusters: %w", label, err)
	}
	step("[%s] clusters up in %.1fs", label, time.Since(t0).Seconds())
	g := &group{b: b, label: label, names: names, kcm: kcm, bed: bed, kubeconfig: bed.KubeconfigPath, logs: bed.Dir, cs: map[string]kubernetes.Interface{}, apiPIDs: map[string]int{}}
	for _, n := range names {
		cfg := rest.CopyConfig(bed.Cluster(n).Config)
		cfg.QPS, cfg.Burst = 5000, 10000
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.cs[n] = cs
	}
	return g, nil
}

func (g *group) origin() kubernetes.Interface { return g.cs[g.names[0]] }
func (g *group) peers() []string              { return g.names[1:] }

// stop stops the controllers, then the clusters.
func (g *group) stop() {
	for _, c := range g.ctrls {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range g.ctrls {
		<-c.done
	}
	g.ctrls = nil
	step("[%s] stopping the clusters", g.label)
	_ = g.bed.Stop()
}

// stopKeepingLogs stops the group; when the run failed (err), it first copies the
// controllers' and the plugin's logs out of the test bed's directory, which stopping
// removes, and says where: the error names that directory.
func (g *group) stopKeepingLogs(err error) {
	if err != nil {
		if dir, kerr := g.keepLogs(); kerr != nil {
			step("[%s] the logs of %s could not be kept: %v", g.label, g.logs, kerr)
		} else {
			step("[%s] run failed: the logs of %s are kept in %s", g.label, g.logs, dir)
		}
	}
	g.stop()
}

// keepLogs copies the *.log files of the group's directory into a new directory, and
// returns it.
func (g *group) keepLogs() (string, error) {
	logs, err := filepath.Glob(filepath.Join(g.logs, "*.log*"))
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "registry-bench-"+g.label+"-logs-")
	if err != nil {
		return "", err
	}
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			return dir, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// stopControllers ends every controller process (SIGTERM, and waits for it), so that no
// controller holds a watch while the floor is measured alone: a stopped process's open
// watches (SIGSTOP) still cost the API servers every event they filter and send. It
// returns what starts them again (their logs so far kept as serve-NAME.log.stopN) and waits
// until each reports its Cluster Ready and the registry syncs again; the controllers run
// without leader election and lose nothing by a restart.
func (g *group) stopControllers(ctx context.Context, reg *side) (restart func() error, err error) {
	for _, c := range g.ctrls {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return nil, fmt.Errorf("stopping the controller of %s: %w", c.name, err)
		}
	}
	for _, c := range g.ctrls {
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g.stops++
	for _, c := range g.ctrls {
		if err := os.Rename(c.log, fmt.Sprintf("%s.stop%d", c.log, g.stops)); err != nil {
			return nil, err
		}
	}
	g.ctrls = nil
	return func() error {
		step("[%s] starting the controllers again", g.label)
		if err := g.startControllers(ctx); err != nil {
			return err
		}
		if reg == nil {
			return nil
		}
		return g.warmUp(ctx, reg)
	}, nil
}

// prepare installs the registry on every cluster and creates the bench's namespaces; no
// controller runs yet (the floor alone is measured then). start does the rest of the
// setup.
func (g *group) prepare(ctx context.Context) error {
	t0 := time.Now()
	defer func() { g.setupTime += time.Since(t0) }()
	step("[%s] kubectl registry install on %d clusters", g.label, len(g.names))
	errs := make([]error, len(g.names))
	var wg sync.WaitGroup
	for i, n := range g.names {
		wg.Go(func() { errs[i] = g.plugin(ctx, "install", "--context", n, "--cluster-name", n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	step("[%s] granting peers ConfigMap read, members ConfigMap write, and creating namespaces %s, %s, %s on every cluster", g.label, nsRegistry, nsFloor, nsAlone)
	for _, n := range g.names {
		// Peers read ConfigMaps; the members' identities, which the controllers write
		// copies as, write them: the ClusterRoles a platform team adds.
		for _, cr := range []*rbacv1.ClusterRole{{
			ObjectMeta: metav1.ObjectMeta{Name: "registry-reader-configmaps", Labels: map[string]string{v1alpha1.ReaderAggregatedLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		}, {
			ObjectMeta: metav1.ObjectMeta{Name: "registry-members-configmaps", Labels: map[string]string{v1alpha1.ControllerAggregatedLabel: "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
		}} {
			if _, err := g.cs[n].RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
		for _, ns := range []string{nsRegistry, nsFloor, nsAlone} {
			if _, err := g.cs[n].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %w", n, err)
			}
		}
		if !g.kcm {
			if err := aggregateClusterRoles(ctx, g.cs[n]); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
		} else if err := waitAggregated(ctx, g.cs[n], v1alpha1.ControllerAggregatedRoleName, "configmaps"); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

// start starts a controller for each cluster, joins the first cluster with every other
// one and applies the bench rule on the first cluster.
func (g *group) start(ctx context.Context) error {
	t0 := time.Now()
	if err := g.startControllers(ctx); err != nil {
		return err
	}
	step("[%s] controllers report their Clusters Ready; joining %s with %s", g.label, g.names[0], strings.Join(g.peers(), ", "))
	for _, peer := range g.peers() {
		if err := g.plugin(ctx, "join", "--context", g.names[0], "--peer-context", peer, "--allow-loopback", "--wait", "--timeout", g.b.o.timeout.String()); err != nil {
			return err
		}
	}
	rule := fmt.Sprintf(`apiVersion: clusterregistry.k8s.cisco.com/v1alpha1
kind: ResourceSyncRule
metadata:
  name: %s
spec:
  groupVersionKind:
    kind: ConfigMap
    version: v1
  rules:
  - match:
    - namespaces: [%s]
      labels:
      - matchLabels:
          %s: "true"
`, ruleName, nsRegistry, syncLabel)
	step("[%s] applying ResourceSyncRule %s (ConfigMaps in %s labelled %s) on %s and waiting for it on every peer", g.label, ruleName, nsRegistry, syncLabel, g.names[0])
	cmd := exec.CommandContext(ctx, g.b.kubectl, "--kubeconfig", g.kubeconfig, "--context", g.names[0], "apply", "-f", "-")
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(rule), &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("applying the rule: %w: %s", err, out.String())
	}
	for _, n := range g.peers() {
		if err := g.waitKubectl(ctx, ruleName, "--context", n, "get", "rsr", ruleName, "-o", "jsonpath={.metadata.name}"); err != nil {
			return err
		}
	}
	g.setupTime += time.Since(t0)
	step("[%s] group formed in %.1fs", g.label, g.setupTime.Seconds())
	return nil
}

// startController runs "kubectl-registry serve" for cluster n as a process. With
// --profile (main group only) the process is this bench binary running the plugin's
// command tree with profiling on signals (see profile.go).
func (g *group) startController(ctx context.Context, n string) (*controller, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// install applied the ClusterRole that may get /metrics.
	scraper, err := testbed.NewMetricsScraper(ctx, g.cs[n], v1alpha1.DefaultNamespace, v1alpha1.MetricsReaderRoleName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n, err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(g.logs, "serve-"+n+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--kubeconfig", g.kubeconfig, "--context", n, "--cluster-name", n,
		"--metrics-bind-address", addr, "--health-probe-bind-address", "0", "--peer-health-interval", "1s", "--allow-loopback-peers"}
	args = append(args, g.serveArgs...)
	c := &controller{name: n, metrics: "https://" + addr + "/metrics", scraper: scraper, log: logPath, done: make(chan struct{})}
	c.cmd = exec.Command(g.b.bin, args...)
	c.cmd.Env = append(os.Environ(), g.b.o.controllerEnv...)
	if g.profile {
		c.profile = filepath.Join(g.b.o.profile, n)
		c.cmd = exec.Command(g.b.self, args...)
		c.cmd.Env = append(os.Environ(), append(g.b.o.controllerEnv, envRunPlugin+"=1", envProfile+"="+c.profile)...)
		if g.profileStart {
			c.cmd.Env = append(c.cmd.Env, envProfileStart+"=1")
		}
	}
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting serve for %s: %w", n, err)
	}
	go func() {
		c.exitErr = c.cmd.Wait()
		_ = log.Close()
		close(c.done)
	}()
	return c, nil
}

// portTaken is how serve fails when the metrics port freePort found was taken before
// serve bound it (another process's outgoing connection may use any free port).
const portTaken = "address already in use"

// startControllers starts a controller for each cluster and waits until each reports its
// own Cluster Ready. A controller that exits is reported at once, with the end of its
// log; one that lost its metrics port to another process is started again on another.
func (g *group) startControllers(ctx context.Context) error {
	for _, n := range g.names {
		c, err := g.startController(ctx, n)
		if err != nil {
			return err
		}
		g.ctrls = append(g.ctrls, c)
	}
	restarts := 0
	for _, n := range g.names {
		for {
			err := g.waitKubectl(ctx, "Ready", "--context", n, "get", "cluster", n, "-o", "jsonpath={.status.state}")
			if err == nil {
				break
			}
			restarted := false
			for i, c := range g.ctrls {
				gone, _ := c.exited()
				logged, _ := os.ReadFile(c.log)
				if !gone || !strings.Contains(string(logged), portTaken) || restarts == 3 {
					continue
				}
				restarts++
				step("[%s] the controller of %s lost its metrics port to another process: starting it again on another (its log: %s.%d)", g.label, c.name, c.log, restarts)
				if rerr := os.Rename(c.log, fmt.Sprintf("%s.%d", c.log, restarts)); rerr != nil {
					return errors.Join(err, rerr)
				}
				nc, serr := g.startController(ctx, c.name)
				if serr != nil {
					return errors.Join(err, serr)
				}
				g.ctrls[i], restarted = nc, true
			}
			if !restarted {
				return err
			}
		}
	}
	return nil
}

// plugin runs the kubectl-registry binary; its output goes to the group's plugin log and
// is quoted on failure.
func (g *group) plugin(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, g.b.bin, append(args, "--kubeconfig", g.kubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if log, lerr := os.OpenFile(filepath.Join(g.logs, "plugin.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); lerr == nil {
		fmt.Fprintf(log, "$ kubectl registry %s\n%s\n", strings.Join(args, " "), out.String())
		_ = log.Close()
	}
	if err != nil {
		return fmt.Errorf("kubectl registry %s: %w:\n%s", strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// waitKubectl polls kubectl until it prints want.
func (g *group) waitKubectl(ctx context.Context, want string, args ...string) error {
	deadline := time.Now().Add(g.b.o.timeout)
	for {
		out, _ := exec.CommandContext(ctx, g.b.kubectl, append([]string{"--kubeconfig", g.kubeconfig}, args...)...).Output()
		if strings.TrimSpace(string(out)) == want {
			return nil
		}
		for _, c := range g.ctrls {
			if gone, exitErr := c.exited(); gone {
				logged, _ := os.ReadFile(c.log)
				return fmt.Errorf("kubectl %s: not %q: the controller of %s exited (%v); the end of its log:\n%s", strings.Join(args, " "), want, c.name, exitErr, tail(string(logged), 2000))
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubectl %s: not %q within %s (controller logs in %s)", strings.Join(args, " "), want, g.b.o.timeout, g.logs)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// aggregateClusterRoles does what kube-controller-manager's clusterrole-aggregation
// controller does, once: every ClusterRole with an aggregationRule gets the rules of the
// ClusterRoles its selectors match. The registry's reader role is aggregated; groups
// started without kube-controller-manager (to save two cores the cost of N of them) call it
// after the labelled roles are in place.
func aggregateClusterRoles(ctx context.Context, cs kubernetes.Interface) error {
	roles, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ClusterRoles: %w", err)
	}
	for _, agg := range roles.Items {
		if agg.AggregationRule == nil {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, ls := range agg.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				return fmt.Errorf("ClusterRole %s: %w", agg.Name, err)
			}
			for _, r := range roles.Items {
				if r.Name == agg.Name || !sel.Matches(labels.Set(r.Labels)) {
					continue
				}
				for _, pr := range r.Rules {
					if !slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(x, pr) }) {
						rules = append(rules, pr)
					}
				}
			}
		}
		if equality.Semantic.DeepEqual(agg.Rules, rules) {
			continue
		}
		agg.Rules = rules
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, &agg, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("aggregating ClusterRole %s: %w", agg.Name, err)
		}
	}
	return nil
}

// waitAggregated waits until kube-controller-manager has aggregated a rule for resource
// into the ClusterRole role, so that no measurement starts with writes RBAC refuses.
func waitAggregated(ctx context.Context, cs kubernetes.Interface, role, resource string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		agg, err := cs.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err == nil {
			for _, r := range agg.Rules {
				if slices.Contains(r.Resources, resource) {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ClusterRole %s does not aggregate %s: %w (last error: %v)", role, resource, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// procMiB reads the fields keys (like "VmHWM") of a process's /proc status, in MiB, in
// the order of keys.
func procMiB(pid int, keys ...string) ([]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(keys))
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		for i, key := range keys {
			if rest, ok := strings.CutPrefix(line, key+":"); ok {
				var kb float64
				if _, err := fmt.Sscan(rest, &kb); err != nil {
					return nil, fmt.Errorf("%s %q: %w", key, rest, err)
				}
				out[i] = kb / 1024
				found++
			}
		}
	}
	if found != len(keys) {
		return nil, fmt.Errorf("not all of %s in /proc status", strings.Join(keys, ", "))
	}
	return out, nil
}

// rss reads the peak (VmHWM) and current (VmRSS) resident set of a process, in MiB.
func rss(pid int) (peak, cur float64, err error) {
	v, err := procMiB(pid, "VmHWM", "VmRSS")
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// fileRSS reads the file-backed part of a process's resident set (RssFile), in MiB: the
// pages of its binary (and other mapped files) it has touched, shared with every process
// that maps them and dropped by the kernel under memory pressure without swapping.
func fileRSS(pid int) (float64, error) {
	v, err := procMiB(pid, "RssFile")
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// controllersFileRSS returns the file-backed part of each controller's RSS in MiB.
func (g *group) controllersFileRSS() (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range g.ctrls {
		f, err := fileRSS(c.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		out[c.name] = f
	}
	return out, nil
}

// controllersRSS returns each controller's peak and current RSS in MiB.
func (g *group) controllersRSS() (peak, cur map[string]float64, err error) {
	peak, cur = map[string]float64{}, map[string]float64{}
	for _, c := range g.ctrls {
		p, r, err := rss(c.cmd.Process.Pid)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.name, err)
		}
		peak[c.name], cur[c.name] = p, r
	}
	return peak, cur, nil
}
