package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
)

func numCPU() int { return runtime.NumCPU() }

// addPeers writes on the member, for every simulated peer, what the seed's swap writes:
// the peer's reader Secret (the same kubeconfig the peers relay), then its Cluster. With
// legacy, the Cluster is annotated as a legacy peer: the member reads the peer with that
// Secret as a full credential and takes no membership from it. Otherwise the Secret is
// the peer's bootstrap credential, and the member reads the peer with the credential the
// peer sealed to it, once it has pulled it.
func addPeers(ctx context.Context, cfg *rest.Config, sims []simPeer, ca []byte, legacy bool) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	clusters := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusters"))
	for _, p := range sims {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: v1alpha1.DefaultNamespace},
			Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.KubeconfigKey: p.kubeconfig}}
		if _, err := cs.CoreV1().Secrets(v1alpha1.DefaultNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("the reader Secret of %s: %w", p.name, err)
		}
		cl := &v1alpha1.Cluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: v1alpha1.ClusterSpec{ClusterID: p.srv.UID(), AuthInfo: v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: p.name, Namespace: v1alpha1.DefaultNamespace}},
				KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: p.srv.URL(), CABundle: ca}}},
		}
		if legacy {
			cl.Annotations = map[string]string{v1alpha1.LegacyPeerAnnotation: "true"}
		}
		m, err := toMap(cl)
		if err != nil {
			return err
		}
		if _, err := clusters.Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("the Cluster of %s: %w", p.name, err)
		}
	}
	return nil
}

// storeMemberKey stores key as the member's key pair, where its controller reads it at
// start (it makes one only when there is none).
func storeMemberKey(ctx context.Context, cfg *rest.Config, key *seal.Key) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := v1alpha1.ReadersNamespace(v1alpha1.DefaultNamespace)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.ReaderKeySecretName,
		Labels: map[string]string{"app.kubernetes.io/part-of": "kubectl-registry"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{v1alpha1.PrivateKeyKey: key.Bytes()}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the member's key Secret: %w", err)
	}
	return nil
}

// credentialReasons counts the member's peer Clusters by the reason of their
// ReaderCredentialReady condition (IssuedCredential: read with the credential the peer
// sealed to the member; LegacyPeer; BootstrapCredential).
func credentialReasons(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	l, err := dyn.Resource(v1alpha1.GroupVersion.WithResource("clusters")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range l.Items {
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		for _, x := range conds {
			m, _ := x.(map[string]any)
			if m["type"] == string(v1alpha1.ClusterConditionReaderCredentialReady) {
				reason, _ := m["reason"].(string)
				out[reason]++
			}
		}
	}
	return out, nil
}

// waitPeersRead returns the seconds from start until the member reads every peer with
// the credential the peer issued it, or as a legacy peer (credentialReasons, polled
// every second), or 0 if ctx ends first.
func (pr *peerRun) waitPeersRead(ctx context.Context, start time.Time) float64 {
	for {
		reasons, err := credentialReasons(ctx, pr.member)
		if err == nil && reasons[v1alpha1.ReasonIssuedCredential]+reasons[v1alpha1.ReasonLegacyPeer] >= pr.n {
			return time.Since(start).Seconds()
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(time.Second):
		}
	}
}

// createRule creates the bench's rule on the member.
func createRule(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(v1alpha1.GroupVersion.WithResource("resourcesyncrules")).Create(ctx, benchRule(), metav1.CreateOptions{})
	return err
}

// copies counts the ConfigMaps of the bench's namespace on the member (all of them
// copies: nothing else writes there), with one request that returns one item.
func (g *group) copies(ctx context.Context) (int, error) {
	l, err := g.cs[memberName].CoreV1().ConfigMaps(nsRegistry).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	}
	return n, nil
}

// waitCopies waits until the member holds want copies.
func (g *group) waitCopies(ctx context.Context, want int) error {
	return g.waitCopiesFrom(ctx, want, nil)
}

// waitCopiesFrom is waitCopies that passes each count it reads to seen (nil: none).
func (g *group) waitCopiesFrom(ctx context.Context, want int, seen func(n int)) error {
	deadline := time.Now().Add(g.b.o.timeout + time.Duration(want/50)*time.Second)
	last := -1
	for {
		n, err := g.copies(ctx)
		if err == nil && seen != nil {
			seen(n)
		}
		if err == nil && n >= want {
			return nil
		}
		if err == nil {
			last = n
		}
		if gone, exitErr := g.ctrls[0].exited(); gone {
			logged, _ := os.ReadFile(g.ctrls[0].log)
			return fmt.Errorf("the controller exited (%v) with %d of %d copies; the end of its log:\n%s", exitErr, last, want, tail(string(logged), 2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d copies after %s (last error: %v; logs in %s)", last, want, time.Until(deadline)+g.b.o.timeout, err, g.logs)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// metricSum sums the series called name whose labels include match.
func metricSum(ss []series, name string, match map[string]string) float64 {
	var v float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, want := range match {
			ok = ok && s.labels[k] == want
		}
		if ok {
			v += s.value
		}
	}
	return v
}

var engineQueue = map[string]string{"name": "resourcesyncrules"}

// waitQuiet waits until the controller has written nothing and its sync queue has been
// empty for quiet.
func (g *group) waitQuiet(ctx context.Context, quiet time.Duration) error {
	c := g.ctrls[0]
	deadline := time.Now().Add(g.b.o.timeout)
	var last float64 = -1
	since := time.Now()
	for {
		ss, err := scrape(ctx, c)
		if err != nil {
			return err
		}
		w := metricSum(ss, "kubectl_registry_sync_writes_total", nil)
		depth := metricSum(ss, "workqueue_depth", engineQueue)
		if w != last || depth > 0 {
			last, since = w, time.Now()
		}
		if time.Since(since) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not go quiet for %s within %s", quiet, g.b.o.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// waitConverged waits until a (re)started controller has every one of its n peers up,
// every peer has served it the whole initial state of its ConfigMaps since before (a
// list, or a watch-list's initial events), and its queue, which has had at least
// objects adds, is empty with nothing in work.
func (g *group) waitConverged(ctx context.Context, c *controller, sg *simpeer.Group, before simpeer.Stats, n, objects int) error {
	cms := simpeer.ConfigMaps.Key()
	deadline := time.Now().Add(g.b.o.timeout + time.Duration(objects/50)*time.Second)
	for {
		ss, err := scrape(ctx, c)
		if err == nil {
			up := metricSum(ss, "kubectl_registry_peer_up", nil)
			adds := metricSum(ss, "workqueue_adds_total", engineQueue)
			depth := metricSum(ss, "workqueue_depth", engineQueue)
			unfinished := metricSum(ss, "workqueue_unfinished_work_seconds", engineQueue)
			served := sg.Stats().Initial[cms] - before.Initial[cms]
			if int(up) == n && served >= int64(n) && adds >= float64(objects) && depth == 0 && unfinished == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("not converged within the timeout: %g of %d peers up, %d of them served the ConfigMaps, %g objects queued of %d, queue depth %g", up, n, served, adds, objects, depth)
			}
		} else if time.Now().After(deadline) {
			return err
		}
		if gone, exitErr := c.exited(); gone {
			return fmt.Errorf("the controller exited: %v", exitErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// cpuRate is the process's CPU seconds per second over d.
func cpuRate(ctx context.Context, pid int, d time.Duration) (float64, error) {
	c0, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	c1, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	return (c1 - c0) / time.Since(t0).Seconds(), nil
}

// measureIdle reads the controller's CPU, writes and requests to the peers over d.
func (g *group) measureIdle(ctx context.Context, c *controller, sg *simpeer.Group, n int, d time.Duration) (*peerIdle, error) {
	pid := c.cmd.Process.Pid
	m0, err := scrape(ctx, c)
	if err != nil {
		return nil, err
	}
	s0 := sg.Stats()
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	cpu1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	s1 := sg.Stats()
	m1, err := scrape(ctx, c)
	if err != nil {
		return nil, err
	}
	idle := &peerIdle{Seconds: secs, CPUms: 1000 * (cpu1 - cpu0) / secs, RequestsPerSecond: map[string]float64{},
		Writes:          metricSum(m1, "kubectl_registry_sync_writes_total", nil) - metricSum(m0, "kubectl_registry_sync_writes_total", nil),
		BookmarksPerSec: float64(s1.Bookmarks-s0.Bookmarks) / secs, EventsPerSec: float64(s1.Events-s0.Events) / secs}
	idle.CPUmsPerPeer = idle.CPUms / float64(n)
	for verb, d := range since(s0.Requests, s1.Requests) {
		idle.RequestsPerSecond[verb] = float64(d) / secs
	}
	return idle, nil
}

// snapshot reads what the controller holds now: memory from /proc and its metrics,
// goroutines, descriptors and sockets, and the connections and watches the peers see.
func snapshot(ctx context.Context, c *controller, sg *simpeer.Group) (*peerSnapshot, error) {
	pid := c.cmd.Process.Pid
	v, err := procMiB(pid, "VmRSS", "RssAnon", "RssFile", "VmHWM")
	if err != nil {
		return nil, err
	}
	ss, err := scrape(ctx, c)
	if err != nil {
		return nil, err
	}
	st := sg.Stats()
	s := &peerSnapshot{RSSMiB: v[0], AnonMiB: v[1], FileMiB: v[2], PeakMiB: v[3],
		HeapMiB:    metricSum(ss, "go_memstats_heap_inuse_bytes", nil) / (1 << 20),
		StackMiB:   metricSum(ss, "go_memstats_stack_inuse_bytes", nil) / (1 << 20),
		Goroutines: metricSum(ss, "go_goroutines", nil),
		PeerConns:  st.Connections, PeerWatches: st.TotalWatches(), WatchesByResource: st.Watches}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	s.OpenFDs = len(fds)
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			s.Sockets++
		}
	}
	return s, nil
}

// slopes are the differences per added peer between consecutive sizes that finished,
// in increasing order whatever the order of --peers.
func (r *peerResults) slopes() {
	r.Slopes = nil
	sizes := slices.Clone(r.Sizes)
	slices.SortStableFunc(sizes, func(a, b *peerResult) int { return a.Peers - b.Peers })
	var prev *peerResult
	for _, s := range sizes {
		if s.Error != "" || s.Steady == nil || s.Idle == nil {
			continue
		}
		if prev != nil && s.Peers > prev.Peers {
			d := float64(s.Peers - prev.Peers)
			r.Slopes = append(r.Slopes, peerSlope{From: prev.Peers, To: s.Peers,
				AnonMiBPerPeer:    (s.Steady.AnonMiB - prev.Steady.AnonMiB) / d,
				IdleCPUmsPerPeer:  (s.Idle.CPUms - prev.Idle.CPUms) / d,
				GoroutinesPerPeer: (s.Steady.Goroutines - prev.Steady.Goroutines) / d})
		}
		prev = s
	}
}

// table prints the curve, one column per size.
func (r *peerResults) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "A member among N simulated peers: %d synced ConfigMaps spread over the peers, a burst of %d, idle window %.0fs (%d CPUs, load %s)\n\n",
		r.Objects, r.Burst, r.IdleSeconds, r.Machine.CPUs, strings.Join(r.Machine.LoadAvg, " -> "))
	lines := peerLines()
	fmt.Fprintf(&b, "%-32s", "peers")
	for _, s := range r.Sizes {
		fmt.Fprintf(&b, "%10d", s.Peers)
	}
	b.WriteString("\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "%-32s", l.name)
		for _, s := range r.Sizes {
			v := "failed"
			if s.Error == "" {
				v = l.f(s)
			}
			fmt.Fprintf(&b, "%10s", v)
		}
		b.WriteString("\n")
	}
	for _, s := range r.Slopes {
		fmt.Fprintf(&b, "per added peer, %d -> %d: %.2f MiB anonymous, %.3f ms/s idle CPU, %.1f goroutines\n", s.From, s.To, s.AnonMiBPerPeer, s.IdleCPUmsPerPeer, s.GoroutinesPerPeer)
	}
	for _, s := range r.Sizes {
		if s.Error != "" {
			fmt.Fprintf(&b, "%d peers failed: %s\n", s.Peers, s.Error)
		}
	}
	return b.String()
}

// peerLine is a line of the curve's table: its name, and its cell for one size.
type peerLine struct {
	name string
	f    func(*peerResult) string
}

// peerLines are the lines of the curve's table, in order: memory, connections, idle
// cost, the cost of a burst, the times to sync, and the membership's objects.
func peerLines() []peerLine {
	return []peerLine{
		{"RSS, idle after restart (MiB)", steadyCell("%.1f", func(s *peerSnapshot) float64 { return s.RSSMiB })},
		{"  anonymous (MiB)", steadyCell("%.1f", func(s *peerSnapshot) float64 { return s.AnonMiB })},
		{"  file-backed (MiB)", steadyCell("%.1f", func(s *peerSnapshot) float64 { return s.FileMiB })},
		{"  Go heap in use (MiB)", steadyCell("%.1f", func(s *peerSnapshot) float64 { return s.HeapMiB })},
		{"peak RSS, first sync (MiB)", numCell("%.1f", func(p *peerResult) float64 { return p.InitialPeakRSSMiB })},
		{"peak RSS, after burst (MiB)", numCell("%.1f", func(p *peerResult) float64 { return p.BurstPeakRSSMiB })},
		{"peak RSS, restart (MiB)", numCell("%.1f", func(p *peerResult) float64 { return p.RestartPeakRSSMiB })},
		{"goroutines", steadyCell("%.0f", func(s *peerSnapshot) float64 { return s.Goroutines })},
		{"sockets (/proc fd)", steadyCell("%.0f", func(s *peerSnapshot) float64 { return float64(s.Sockets) })},
		{"connections to peers", steadyCell("%.0f", func(s *peerSnapshot) float64 { return float64(s.PeerConns) })},
		{"watches open on peers", steadyCell("%.0f", func(s *peerSnapshot) float64 { return float64(s.PeerWatches) })},
		{"idle CPU (ms/s)", idleCell("%.2f", func(i *peerIdle) float64 { return i.CPUms })},
		{"idle CPU per peer (ms/s)", idleCell("%.3f", func(i *peerIdle) float64 { return i.CPUmsPerPeer })},
		{"idle requests to peers (/s)", idleCell("%.1f", func(i *peerIdle) float64 {
			var t float64
			for _, v := range i.RequestsPerSecond {
				t += v
			}
			return t
		})},
		{"idle writes", idleCell("%.0f", func(i *peerIdle) float64 { return i.Writes })},
		{"idle CPU, no heartbeats (ms/s)", idleStaticCell("%.2f", func(i *peerIdle) float64 { return i.CPUms })},
		{"  per peer (ms/s)", idleStaticCell("%.3f", func(i *peerIdle) float64 { return i.CPUmsPerPeer })},
		{"CPU per 1,000 synced (s)", numCell("%.2f", func(p *peerResult) float64 { return p.CPUPer1000Synced })},
		{"  idle CPU it is net of (ms/s)", numCell("%.0f", func(p *peerResult) float64 { return p.IdleBeforeBurstCPU })},
		{"burst to the member (s)", numCell("%.2f", func(p *peerResult) float64 { return p.BurstSeconds })},
		{"first sync of all copies (s)", numCell("%.1f", func(p *peerResult) float64 { return p.InitialSyncSeconds })},
		{"  member cores, to 1st copy", beforeCopyCell("%.2f", func(s *machineShare) float64 { return s.MemberCPU / s.Seconds })},
		{"  machine busy, to 1st copy (%)", beforeCopyCell("%.0f", func(s *machineShare) float64 { return 100 * s.Busy })},
		{"  initial states read (MB)", numCell("%.1f", func(p *peerResult) float64 {
			var t int64
			for _, n := range p.InitialBytes {
				t += n
			}
			return float64(t) / 1e6
		})},
		{"converge after restart (s)", numCell("%.1f", func(p *peerResult) float64 { return p.RestartConvergeSeconds })},
		{"  writes at restart", numCell("%.0f", func(p *peerResult) float64 { return p.RestartWrites })},
		{"  reconciles at restart", numCell("%.0f", func(p *peerResult) float64 { return p.RestartReconciles })},
		{"membership objects per peer", numCell("%.0f", func(p *peerResult) float64 { return float64(p.MembershipClusters + p.MembershipSecrets) })},
	}
}

// numCell is a cell of a figure of the size, in format.
func numCell(format string, f func(*peerResult) float64) func(*peerResult) string {
	return func(p *peerResult) string { return fmt.Sprintf(format, f(p)) }
}

// steadyCell is a cell of a figure of the size's steady state, in format; "-" without
// one.
// beforeCopyCell is a cell of the machine's share before the first copy, "-" when not
// measured.
func beforeCopyCell(format string, f func(*machineShare) float64) func(*peerResult) string {
	return func(p *peerResult) string {
		if p.InitialBeforeFirstCopy == nil || p.InitialBeforeFirstCopy.Seconds <= 0 {
			return "-"
		}
		return fmt.Sprintf(format, f(p.InitialBeforeFirstCopy))
	}
}

func steadyCell(format string, f func(*peerSnapshot) float64) func(*peerResult) string {
	return func(p *peerResult) string {
		if p.Steady == nil {
			return "-"
		}
		return fmt.Sprintf(format, f(p.Steady))
	}
}

// idleCell is a cell of a figure of the size's idle window, in format; "-" without one.
func idleCell(format string, f func(*peerIdle) float64) func(*peerResult) string {
	return func(p *peerResult) string {
		if p.Idle == nil {
			return "-"
		}
		return fmt.Sprintf(format, f(p.Idle))
	}
}

// idleStaticCell is a cell of a figure of the size's idle window without heartbeats, in
// format; "-" without one.
func idleStaticCell(format string, f func(*peerIdle) float64) func(*peerResult) string {
	return func(p *peerResult) string {
		if p.IdleStatic == nil {
			return "-"
		}
		return fmt.Sprintf(format, f(p.IdleStatic))
	}
}
