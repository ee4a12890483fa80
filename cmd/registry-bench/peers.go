package main

// --mode peers (make bench-scale): one real member among N simulated peers.
//
// The member is a real API server (the test bed, without kube-controller-manager) and
// a real `kubectl-registry serve` process with the defaults of an install (health checks
// every 5 s). Its peers are simulated API servers (reconciler/peers/simpeer), all in this
// process, each on its own loopback TLS listener with its own token and kube-system UID,
// serving what a member of a group of N+1 holds: every member's Cluster and reader
// Secret, the credentials it issued to and received from every other member, the bench's
// rule (as the built-in rule copied it there), and its share of the synced ConfigMaps.
// Discovery is the member's own API server's, captured. The member knows each peer as
// the seed's swap leaves it: a Cluster and a reader Secret written by hand, the Cluster
// annotated as a legacy peer, so that the member reads the peer with that Secret
// directly (no sealed-credential exchange, which needs a real peer's controller).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
	"github.com/kubectl-registry/kubectl-registry/reconciler/credentials/seal"
	"github.com/kubectl-registry/kubectl-registry/reconciler/kubeconfig"
	"github.com/kubectl-registry/kubectl-registry/reconciler/peers/simpeer"
	"github.com/kubectl-registry/kubectl-registry/reconciler/planner"
)

// memberName is the real member's cluster.
const memberName = "member"

// peerOptions are the flags of --mode peers.
type peerOptions struct {
	sizes       []int
	objects     int
	burst       int
	idle        time.Duration
	quiet       time.Duration
	noWatchList bool
	// legacy: the member knows its peers as legacy peers (reads them with their shared
	// reader Secret, takes no membership from them) instead of reading them with the
	// credentials they sealed to it.
	legacy bool
	// keepLogs keeps the member's logs of every size, not only of a size that failed.
	keepLogs bool
	// heartbeat is the period at which every peer refreshes the heartbeat of each of its
	// Clusters, as a member's controller does (clusters.DefaultHeartbeatPeriod); 0: never.
	heartbeat time.Duration
}

// peerResult is one size: the member among Peers simulated peers.
type peerResult struct {
	Peers int `json:"peers"`
	// Objects are the ConfigMaps the peers serve (Objects/Peers each) and the member
	// copies; the burst's are added later.
	Objects int `json:"objects"`
	// Membership is what each peer serves of the membership: Clusters and Secrets.
	MembershipClusters int  `json:"membership_clusters_per_peer"`
	MembershipSecrets  int  `json:"membership_secrets_per_peer"`
	WatchList          bool `json:"watch_list"`
	// Legacy: the member read its peers as legacy peers (--legacy-peers), not with the
	// credentials they sealed to it.
	Legacy bool `json:"legacy_peers"`
	// Credentials counts the member's peer Clusters by how it reads them (the reason of
	// their ReaderCredentialReady condition) once idle.
	Credentials map[string]int `json:"credentials,omitempty"`

	// The first start: every copy written.
	InitialSyncSeconds    float64 `json:"initial_sync_seconds"`
	InitialSyncCPUSeconds float64 `json:"initial_sync_cpu_seconds"`
	InitialPeakRSSMiB     float64 `json:"initial_peak_rss_mib"`
	InitialWrites         float64 `json:"initial_writes"`
	// InitialReconciles counts the items the engine's queue took (workqueue_adds_total,
	// a duplicate of an item still queued not counted): one reconcile each.
	InitialReconciles float64 `json:"initial_reconciles"`
	// The phases of the first sync, from the controller's start: every peer read with
	// the credential it issued the member (or as a legacy peer), seen on the member's
	// Clusters (polled every second), and the first copy written (polled with the
	// copies, every 250 ms). Zero when not seen before every copy was.
	InitialPeersReadSeconds float64 `json:"initial_peers_read_seconds"`
	InitialFirstCopySeconds float64 `json:"initial_first_copy_seconds"`
	// Where the machine's CPU went in the two parts of the first sync: before the first
	// copy (membership, credentials, the peers' first lists) and from it to the last.
	InitialBeforeFirstCopy *machineShare `json:"initial_before_first_copy,omitempty"`
	InitialCopies          *machineShare `json:"initial_copies,omitempty"`
	// InitialBytes are the bytes of the objects the peers served the member in initial
	// states (lists, watch-lists) during the first sync, all peers together, by resource:
	// what it decoded of them.
	InitialBytes map[string]int64 `json:"initial_bytes,omitempty"`
	// InitialStates counts those initial states, by resource.
	InitialStates map[string]int64 `json:"initial_states,omitempty"`

	// A burst of new objects on the peers (spread over them), and its cost less the
	// idle rate.
	Burst              int     `json:"burst"`
	BurstSeconds       float64 `json:"burst_seconds"`
	BurstCPUSeconds    float64 `json:"burst_cpu_seconds"`
	CPUPer1000Synced   float64 `json:"cpu_seconds_per_1000_synced"`
	BurstWrites        float64 `json:"burst_writes"`
	BurstPeakRSSMiB    float64 `json:"burst_peak_rss_mib"`
	IdleBeforeBurstCPU float64 `json:"idle_before_burst_cpu_ms_per_s"`

	// A restart: from the new process's start to every peer up, every object seen and
	// its queue empty, with no write.
	RestartConvergeSeconds float64 `json:"restart_converge_seconds"`
	RestartCPUSeconds      float64 `json:"restart_cpu_seconds"`
	RestartWrites          float64 `json:"restart_writes"`
	RestartReconciles      float64 `json:"restart_reconciles"`
	RestartPeakRSSMiB      float64 `json:"restart_peak_rss_mib"`

	// Idle, after the restart; IdleStatic the same with the peers' heartbeats stopped.
	Idle       *peerIdle `json:"idle,omitempty"`
	IdleStatic *peerIdle `json:"idle_without_heartbeats,omitempty"`
	// Steady is the restarted member, idle.
	Steady *peerSnapshot `json:"steady,omitempty"`

	SetupSeconds float64 `json:"setup_seconds"`
	// Profiles are the CPU, heap and goroutine profiles of the first sync, the burst, the
	// restart and the idle window (--profile).
	Profiles []string `json:"profiles,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// peerIdle is the member's cost over an idle window.
type peerIdle struct {
	Seconds float64 `json:"seconds"`
	// CPUms is the process's CPU per second of the window, in ms/s; PerPeer divided by
	// the peers.
	CPUms        float64 `json:"cpu_ms_per_s"`
	CPUmsPerPeer float64 `json:"cpu_ms_per_s_per_peer"`
	Writes       float64 `json:"writes"`
	// Requests the member made of the peers per second (health checks, lists,
	// discovery, new watches), by verb; Bookmarks and Events what the peers sent.
	RequestsPerSecond map[string]float64 `json:"requests_per_second"`
	BookmarksPerSec   float64            `json:"bookmarks_per_second"`
	EventsPerSec      float64            `json:"events_per_second"`
}

// peerSnapshot is what the member holds at one time.
type peerSnapshot struct {
	RSSMiB      float64 `json:"rss_mib"`
	AnonMiB     float64 `json:"rss_anon_mib"`
	FileMiB     float64 `json:"rss_file_mib"`
	PeakMiB     float64 `json:"peak_rss_mib"`
	HeapMiB     float64 `json:"heap_inuse_mib"`
	StackMiB    float64 `json:"stack_inuse_mib"`
	Goroutines  float64 `json:"goroutines"`
	OpenFDs     int     `json:"open_fds"`
	Sockets     int     `json:"sockets"`
	PeerConns   int64   `json:"peer_connections"`
	PeerWatches int64   `json:"peer_watches"`
	// WatchesByResource are the watches open on the peers, by resource.
	WatchesByResource map[string]int64 `json:"watches_by_resource"`
}

// peerResults is what --mode peers writes.
type peerResults struct {
	Date    string `json:"date"`
	Binary  string `json:"binary"`
	Machine struct {
		CPUs    int      `json:"cpus"`
		LoadAvg []string `json:"load_avg"`
	} `json:"machine"`
	Objects      int           `json:"objects"`
	Burst        int           `json:"burst"`
	IdleSeconds  float64       `json:"idle_seconds"`
	Sizes        []*peerResult `json:"sizes"`
	TotalSeconds float64       `json:"total_seconds"`
	// Slopes are the differences per added peer between consecutive sizes (at the same
	// number of synced objects): anonymous RSS in MiB, idle CPU in ms/s, goroutines.
	Slopes []peerSlope `json:"slopes,omitempty"`
}

type peerSlope struct {
	From              int     `json:"from"`
	To                int     `json:"to"`
	AnonMiBPerPeer    float64 `json:"rss_anon_mib_per_peer"`
	IdleCPUmsPerPeer  float64 `json:"idle_cpu_ms_per_s_per_peer"`
	GoroutinesPerPeer float64 `json:"goroutines_per_peer"`
}

// runPeers runs --mode peers: every size of o.sizes, one fresh member each; after each
// size it calls progress with the results so far.
func (b *bench) runPeers(ctx context.Context, po peerOptions, progress func(*peerResults) error) (*peerResults, error) {
	res := &peerResults{Date: time.Now().UTC().Format(time.RFC3339), Objects: po.objects, Burst: po.burst, IdleSeconds: po.idle.Seconds()}
	res.Machine.CPUs = numCPU()
	res.Machine.LoadAvg = append(res.Machine.LoadAvg, loadAvg())
	started := time.Now()
	for _, n := range po.sizes {
		r, err := b.runPeerSize(ctx, po, n)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			step("[peers-%d] failed: %v", n, err)
			if r == nil {
				r = &peerResult{Peers: n}
			}
			r.Error = err.Error()
		}
		res.Sizes = append(res.Sizes, r)
		res.slopes()
		if err := progress(res); err != nil {
			return nil, err
		}
	}
	res.TotalSeconds = time.Since(started).Seconds()
	res.Machine.LoadAvg = append(res.Machine.LoadAvg, loadAvg())
	return res, nil
}

// simPeer is one simulated peer, as the member and the other peers know it.
type simPeer struct {
	name string
	srv  *simpeer.Server
	// key is its key pair (its Cluster advertises the public key); kubeconfig its shared
	// reader kubeconfig (its server, the group's CA, its token), the same bytes in every
	// member's copy of its reader Secret.
	key        *seal.Key
	kubeconfig []byte
	// clusters are the Clusters it serves, as created (heartbeats updates them).
	clusters []map[string]any
}

// heartbeats refreshes, until ctx is done, the heartbeat of every Cluster of every peer
// once per period, one at a time, evenly spread: what the members' controllers do to
// their Clusters' conditions (every Cluster, its own and its peers', every 5 min). The
// member sees each as a watch event of its peer's Clusters.
func heartbeats(ctx context.Context, sims []simPeer, period time.Duration) {
	total := 0
	for _, p := range sims {
		total += len(p.clusters)
	}
	if period <= 0 || total == 0 {
		return
	}
	t := time.NewTicker(max(period/time.Duration(total), time.Millisecond))
	defer t.Stop()
	for {
		for _, p := range sims {
			for _, cl := range p.clusters {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				now := time.Now().UTC().Format(time.RFC3339)
				st, _ := cl["status"].(map[string]any)
				conds, _ := st["conditions"].([]any)
				for _, c := range conds {
					if m, ok := c.(map[string]any); ok {
						m["lastHeartbeatTime"] = now
					}
				}
				if _, err := p.srv.Update(simpeer.Clusters, runtime.DeepCopyJSON(cl)); err != nil {
					step("heartbeat of a simulated Cluster: %v", err)
					return
				}
			}
		}
	}
}

// runPeerSize measures the member among n peers: it starts the member and its simulated
// peers, then measures the initial sync, a burst, a restart and the idle member.
func (b *bench) runPeerSize(ctx context.Context, po peerOptions, n int) (_ *peerResult, err error) {
	label := fmt.Sprintf("peers-%d", n)
	t0 := time.Now()
	g, err := b.startGroup(ctx, label, []string{memberName}, false)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil && po.keepLogs {
			if dir, kerr := g.keepLogs(); kerr == nil {
				step("[%s] logs kept in %s", label, dir)
			}
		}
		g.stopKeepingLogs(err)
	}()
	// The defaults of an install: a peer's health is checked every 5 s.
	g.serveArgs = []string{"--peer-health-interval", "5s"}
	// With --profile the controller is this binary (about 20 MiB more RSS), profiled over
	// its first sync, the burst, the restart and the idle window.
	g.profile = b.o.profile != ""
	g.profileStart = g.profile
	if err := g.prepare(ctx); err != nil {
		return nil, err
	}
	member := g.bed.Cluster(memberName)
	memberID, err := member.KubeSystemUID(ctx)
	if err != nil {
		return nil, err
	}
	disc, err := simpeer.CaptureDiscovery(ctx, member.Config)
	if err != nil {
		return nil, err
	}
	sg, err := simpeer.NewGroup()
	if err != nil {
		return nil, err
	}
	sims := make([]simPeer, n)
	defer func() {
		for _, p := range sims {
			if p.srv != nil {
				_ = p.srv.Close()
			}
		}
	}()
	step("[%s] starting %d simulated peers (watch-list %v), %d ConfigMaps among them", label, n, !po.noWatchList, po.objects)
	if err := startSimPeers(sg, disc, sims, po.noWatchList); err != nil {
		return nil, err
	}
	pr := &peerRun{label: label, po: po, n: n, g: g, member: member.Config, sg: sg, sims: sims,
		r: &peerResult{Peers: n, Objects: po.objects, Burst: po.burst, WatchList: !po.noWatchList, Legacy: po.legacy}}
	hctx, stopHeartbeats := context.WithCancel(ctx)
	defer stopHeartbeats()
	if err := pr.provision(ctx, hctx, memberID); err != nil {
		return pr.r, err
	}
	pr.r.SetupSeconds = time.Since(t0).Seconds()
	for _, phase := range []func(context.Context) error{pr.initialSync, pr.burst, pr.restart, pr.idle} {
		if err := phase(ctx); err != nil {
			return pr.r, err
		}
	}
	return pr.r, pr.idleWithoutHeartbeats(ctx, stopHeartbeats)
}

// startSimPeers starts a simulated peer in sims[i] for every i, each serving discovery
// disc, with the token of the reader ServiceAccount; it leaves in sims the peers it
// started, for the caller to close, when one fails to start.
func startSimPeers(sg *simpeer.Group, disc *simpeer.Discovery, sims []simPeer, noWatchList bool) error {
	for i := range sims {
		srv, err := sg.Start(simpeer.Options{UID: uuid.NewUUID(), Token: serviceAccountToken("system:serviceaccount:" + v1alpha1.DefaultNamespace + ":cluster-registry-reader"), Discovery: disc, NoWatchList: noWatchList})
		if err != nil {
			return err
		}
		if sims[i], err = newSimPeer(fmt.Sprintf("p%03d", i+1), srv, sg.CAData()); err != nil {
			return err
		}
	}
	return nil
}

// peerRun is one size of --mode peers under way: the member, its simulated peers, its
// controller once started, and what has been measured so far.
type peerRun struct {
	label  string
	po     peerOptions
	n      int
	g      *group
	member *rest.Config
	sg     *simpeer.Group
	sims   []simPeer
	r      *peerResult
	// c is the member's controller and pid its process, once started (again).
	c   *controller
	pid int
}

// provision fills the peers with what a group of n+1 holds, starts their heartbeats
// (until hctx is done), and gives the member its peers and the bench's rule.
func (pr *peerRun) provision(ctx, hctx context.Context, memberID types.UID) error {
	po, r := pr.po, pr.r
	// The member's key pair, made here and stored where its controller looks for it
	// first, so that every peer can seal the credential it issues the member before the
	// member starts (as a group's members have, once they have read its key).
	var memberKey *seal.Key
	var err error
	if !po.legacy {
		if memberKey, err = seal.GenerateKey(); err != nil {
			return err
		}
		if err := storeMemberKey(ctx, pr.member, memberKey); err != nil {
			return err
		}
	}
	if r.MembershipClusters, r.MembershipSecrets, err = fillPeers(pr.sims, memberID, memberKey, pr.sg.CAData(), po.objects); err != nil {
		return err
	}
	step("[%s] each peer serves %d Clusters (their heartbeats refreshed every %s), %d Secrets of the registry namespace, the rule and ~%d ConfigMaps", pr.label, r.MembershipClusters, po.heartbeat, r.MembershipSecrets, po.objects/pr.n)
	go heartbeats(hctx, pr.sims, po.heartbeat)
	if err := addPeers(ctx, pr.member, pr.sims, pr.sg.CAData(), po.legacy); err != nil {
		return err
	}
	return createRule(ctx, pr.member)
}

// initialSync starts the member's controller and measures its first sync of every
// object of its peers.
func (pr *peerRun) initialSync(ctx context.Context) error {
	po, r, g := pr.po, pr.r, pr.g
	step("[%s] starting the member's controller; waiting for %d copies", pr.label, po.objects)
	apiPID, err := apiServerPID(g.bed.Cluster(memberName).APIServerURL())
	if err != nil {
		return err
	}
	m0, err := readMachine(0, apiPID) // the member's controller is not started yet
	if err != nil {
		return err
	}
	served0 := pr.sg.Stats()
	start := m0.at
	if err := g.startControllers(ctx); err != nil {
		return err
	}
	pr.c = g.ctrls[0]
	pr.pid = pr.c.cmd.Process.Pid
	var m1 machineReading
	pctx, stop := context.WithCancel(ctx)
	peersRead := make(chan float64, 1)
	go func() { peersRead <- pr.waitPeersRead(pctx, start) }()
	err = g.waitCopiesFrom(ctx, po.objects, func(n int) {
		if n > 0 && r.InitialFirstCopySeconds == 0 {
			r.InitialFirstCopySeconds = time.Since(start).Seconds()
			m1, _ = readMachine(pr.pid, apiPID) // a failure shows as no share
		}
	})
	stop()
	r.InitialPeersReadSeconds = <-peersRead
	if err != nil {
		return err
	}
	r.InitialSyncSeconds = time.Since(start).Seconds()
	served := pr.sg.Stats()
	r.InitialBytes, r.InitialStates = since(served0.InitialBytes, served.InitialBytes), since(served0.Initial, served.Initial)
	if m2, err := readMachine(pr.pid, apiPID); err == nil && !m1.at.IsZero() {
		before, copies := share(m0, m1), share(m1, m2)
		r.InitialBeforeFirstCopy, r.InitialCopies = &before, &copies
	}
	if r.InitialSyncCPUSeconds, err = procCPU(pr.pid); err != nil {
		return err
	}
	if g.profile {
		r.Profiles = append(r.Profiles, g.stopProfiles(pr.label+".sync")...)
	}
	if err := g.waitQuiet(ctx, po.quiet); err != nil {
		return err
	}
	m, err := scrape(ctx, pr.c)
	if err != nil {
		return err
	}
	r.InitialWrites = total(map[string]map[string]float64{"": syncWrites(m)})
	r.InitialReconciles = metricSum(m, "workqueue_adds_total", engineQueue)
	if r.InitialPeakRSSMiB, _, err = rss(pr.pid); err != nil {
		return err
	}
	step("[%s]   %d copies in %.1fs, %.1f s of CPU, peak RSS %.1f MiB, %.0f writes, %.0f reconciles; every peer read with its own credential at %.1fs, the first copy at %.1fs", pr.label, po.objects, r.InitialSyncSeconds, r.InitialSyncCPUSeconds, r.InitialPeakRSSMiB, r.InitialWrites, r.InitialReconciles, r.InitialPeersReadSeconds, r.InitialFirstCopySeconds)
	if r.InitialCopies != nil {
		step("[%s]   before the first copy: %s", pr.label, r.InitialBeforeFirstCopy)
		step("[%s]   from it to the last: %s", pr.label, r.InitialCopies)
	}
	step("[%s]   the peers served it %v initial states (lists, watch-lists) of %s", pr.label, r.InitialStates, formatBytes(r.InitialBytes))
	return nil
}

// burst measures po.burst new objects spread over the peers, against the idle rate just
// before.
func (pr *peerRun) burst(ctx context.Context) error {
	po, r, g, pid := pr.po, pr.r, pr.g, pr.pid
	idleCPU, err := cpuRate(ctx, pid, 5*time.Second)
	if err != nil {
		return err
	}
	r.IdleBeforeBurstCPU = 1000 * idleCPU
	step("[%s] burst: %d ConfigMaps created at once on the peers", pr.label, po.burst)
	before, _ := scrape(ctx, pr.c)
	cpu0, err := procCPU(pid)
	if err != nil {
		return err
	}
	if g.profile {
		g.startProfiles()
	}
	t1 := time.Now()
	for i := range po.burst {
		p := pr.sims[i%pr.n]
		if _, err := p.srv.Create(simpeer.ConfigMaps, benchConfigMap(fmt.Sprintf("burst-%s-%d", p.name, i))); err != nil {
			return err
		}
	}
	if err := g.waitCopies(ctx, po.objects+po.burst); err != nil {
		return err
	}
	r.BurstSeconds = time.Since(t1).Seconds()
	cpu1, err := procCPU(pid)
	if err != nil {
		return err
	}
	if g.profile {
		r.Profiles = append(r.Profiles, g.stopProfiles(pr.label+".burst")...)
	}
	r.BurstCPUSeconds = max(0, cpu1-cpu0-idleCPU*r.BurstSeconds)
	r.CPUPer1000Synced = r.BurstCPUSeconds * 1000 / float64(po.burst)
	if err := g.waitQuiet(ctx, po.quiet); err != nil {
		return err
	}
	after, _ := scrape(ctx, pr.c)
	r.BurstWrites = total(map[string]map[string]float64{"": syncWrites(after)}) - total(map[string]map[string]float64{"": syncWrites(before)})
	if r.BurstPeakRSSMiB, _, err = rss(pid); err != nil {
		return err
	}
	step("[%s]   %.2fs, %.2f s of CPU (%.2f s per 1,000), %.0f writes", pr.label, r.BurstSeconds, r.BurstCPUSeconds, r.CPUPer1000Synced, r.BurstWrites)
	return nil
}

// restart restarts the member's controller and measures how it converges again.
func (pr *peerRun) restart(ctx context.Context) error {
	po, r, g := pr.po, pr.r, pr.g
	step("[%s] restarting the member's controller", pr.label)
	restart, err := g.stopControllers(ctx, nil)
	if err != nil {
		return err
	}
	all := po.objects + po.burst
	served := pr.sg.Stats()
	t2 := time.Now()
	if err := restart(); err != nil {
		return err
	}
	pr.c = g.ctrls[0]
	pr.pid = pr.c.cmd.Process.Pid
	if err := g.waitConverged(ctx, pr.c, pr.sg, served, pr.n, all); err != nil {
		return err
	}
	r.RestartConvergeSeconds = time.Since(t2).Seconds()
	if r.RestartCPUSeconds, err = procCPU(pr.pid); err != nil {
		return err
	}
	if g.profile {
		r.Profiles = append(r.Profiles, g.stopProfiles(pr.label+".restart")...)
	}
	if err := g.waitQuiet(ctx, po.quiet); err != nil {
		return err
	}
	m, err := scrape(ctx, pr.c)
	if err != nil {
		return err
	}
	r.RestartWrites = total(map[string]map[string]float64{"": syncWrites(m)})
	r.RestartReconciles = metricSum(m, "workqueue_adds_total", engineQueue)
	if r.RestartPeakRSSMiB, _, err = rss(pr.pid); err != nil {
		return err
	}
	step("[%s]   converged in %.1fs (%.1f s of CPU, peak RSS %.1f MiB, %.0f writes, %.0f reconciles)", pr.label, r.RestartConvergeSeconds, r.RestartCPUSeconds, r.RestartPeakRSSMiB, r.RestartWrites, r.RestartReconciles)
	return nil
}

// idle measures the idle member over po.idle (profiled with --profile), then its steady
// state and the credentials it reads its peers with.
func (pr *peerRun) idle(ctx context.Context) error {
	po, r, g, label := pr.po, pr.r, pr.g, pr.label
	step("[%s] idle for %s", label, po.idle)
	if g.profile {
		g.startProfiles()
	}
	var err error
	if r.Idle, err = g.measureIdle(ctx, pr.c, pr.sg, pr.n, po.idle); err != nil {
		return err
	}
	if g.profile {
		r.Profiles = append(r.Profiles, g.stopProfiles(label+".idle")...)
	}
	if r.Steady, err = snapshot(ctx, pr.c, pr.sg); err != nil {
		return err
	}
	if r.Credentials, err = credentialReasons(ctx, pr.member); err != nil {
		return err
	}
	s := r.Steady
	step("[%s]   peers read with: %v", label, r.Credentials)
	step("[%s]   idle CPU %.2f ms/s (%.3f ms/s per peer), %.0f writes; RSS %.1f MiB (anon %.1f, file %.1f), heap %.1f MiB, %g goroutines, %d sockets, %d peer connections, %d watches on peers %v",
		label, r.Idle.CPUms, r.Idle.CPUmsPerPeer, r.Idle.Writes, s.RSSMiB, s.AnonMiB, s.FileMiB, s.HeapMiB, s.Goroutines, s.Sockets, s.PeerConns, s.PeerWatches, s.WatchesByResource)
	return nil
}

// idleWithoutHeartbeats measures the same idle window with the heartbeats stopped (by
// stopHeartbeats): what the peers cost the member when nothing of theirs changes
// (connections, health checks, bookmarks, watches made again), apart from the
// membership's churn. It does nothing when the peers send no heartbeats.
func (pr *peerRun) idleWithoutHeartbeats(ctx context.Context, stopHeartbeats func()) error {
	po, r, label := pr.po, pr.r, pr.label
	if po.heartbeat <= 0 {
		return nil
	}
	stopHeartbeats()
	step("[%s] idle for %s again, the peers' heartbeats stopped (after %s for the member to catch up)", label, po.idle, 2*po.quiet)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * po.quiet):
	}
	var err error
	if r.IdleStatic, err = pr.g.measureIdle(ctx, pr.c, pr.sg, pr.n, po.idle); err != nil {
		return err
	}
	step("[%s]   idle CPU without heartbeats %.2f ms/s (%.3f ms/s per peer)", label, r.IdleStatic.CPUms, r.IdleStatic.CPUmsPerPeer)
	return nil
}

// newSimPeer makes the peer served by srv: its key pair and shared reader kubeconfig.
func newSimPeer(name string, srv *simpeer.Server, ca []byte) (simPeer, error) {
	key, err := seal.GenerateKey()
	if err != nil {
		return simPeer{}, err
	}
	kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: name, Server: srv.URL(), CAData: ca, Token: srv.Token()})
	if err != nil {
		return simPeer{}, err
	}
	return simPeer{name: name, srv: srv, key: key, kubeconfig: kc}, nil
}

// serviceAccountToken returns a token shaped as a ServiceAccount token of a 24 h
// TokenRequest (a JWT of about a kilobyte whose exp and iat the registry reads, as it
// does of every relayed token), random where a real one is signed. sub names the
// ServiceAccount.
func serviceAccountToken(sub string) string {
	enc := base64.RawURLEncoding
	kid := make([]byte, 32)
	sig := make([]byte, 256) // RS256
	_, _ = rand.Read(kid)
	_, _ = rand.Read(sig)
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": enc.EncodeToString(kid)})
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{
		"aud": []string{"https://kubernetes.default.svc.cluster.local"}, "exp": now.Add(24 * time.Hour).Unix(), "iat": now.Unix(),
		"iss": "https://kubernetes.default.svc.cluster.local", "jti": string(uuid.NewUUID()), "nbf": now.Unix(), "sub": sub,
		"kubernetes.io": map[string]any{"namespace": v1alpha1.DefaultNamespace, "serviceaccount": map[string]string{"name": "cluster-registry-reader", "uid": string(uuid.NewUUID())}},
	})
	return enc.EncodeToString(header) + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString(sig)
}

// toMap converts a typed object to the map simpeer stores.
func toMap(obj runtime.Object) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// benchConfigMap is a synced ConfigMap as a peer's API server holds it: the bench's
// label and data, and the managedFields its writer left (which the member's caches
// drop, but which cross the wire).
func benchConfigMap(name string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{
			"name": name, "namespace": nsRegistry, "labels": map[string]any{syncLabel: "true"},
			"managedFields": []any{map[string]any{
				"manager": "registry-bench", "operation": "Update", "apiVersion": "v1", "time": time.Now().UTC().Format(time.RFC3339),
				"fieldsType": "FieldsV1", "fieldsV1": map[string]any{
					"f:data":     map[string]any{".": map[string]any{}, "f:payload": map[string]any{}, "f:v": map[string]any{}},
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:" + syncLabel: map[string]any{}}},
				},
			}},
		},
		"data": map[string]any{"v": "b", "payload": "bench"},
	}
}

// benchRule is the bench's ResourceSyncRule: ConfigMaps of namespace bench labelled
// syncLabel.
func benchRule() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "ResourceSyncRule",
		"metadata": map[string]any{"name": ruleName},
		"spec": map[string]any{
			"groupVersionKind": map[string]any{"kind": "ConfigMap", "version": "v1"},
			"rules": []any{map[string]any{"match": []any{map[string]any{
				"namespaces": []any{nsRegistry},
				"labels":     []any{map[string]any{"matchLabels": map[string]any{syncLabel: "true"}}},
			}}}},
		},
	}}
}

// sealedSize is about the size of a sealed reader credential (a kubeconfig with a CA
// and a token, sealed).
const sealedSize = 2600

// fillPeers gives every simulated peer what a member of a group of len(sims)+1 holds:
// a Cluster and a reader Secret of every member (its own a Local Cluster), the reader
// credentials it issued to every other member and those it received, the bench's rule
// as copied from the member, the bench's namespace, and its share of objects ConfigMaps.
// With memberKey, the credential each peer issued the member is sealed to it and opens:
// a kubeconfig of the peer with its token. It returns the Clusters and Secrets each peer
// serves.
func fillPeers(sims []simPeer, memberID types.UID, memberKey *seal.Key, ca []byte, objects int) (clusters, secrets int, err error) {
	members, err := groupMembers(sims, memberID, memberKey, ca)
	if err != nil {
		return 0, 0, err
	}
	rule := benchRule()
	planner.Mark(rule, memberID, v1alpha1.CoreRuleName)
	now := metav1.Now()
	for i := range sims {
		p := &sims[i]
		for _, ns := range []string{v1alpha1.DefaultNamespace, nsRegistry} {
			if err := p.put(simpeer.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return 0, 0, err
			}
		}
		clusters, secrets = 0, 0
		for _, m := range members {
			n, err := p.serveMember(m, memberID, memberKey, ca, now)
			if err != nil {
				return 0, 0, err
			}
			clusters++
			secrets += n
		}
		if _, err := p.srv.Create(simpeer.ResourceSyncRules, rule.DeepCopy().Object); err != nil {
			return 0, 0, err
		}
		for j := i; j < objects; j += len(sims) {
			if _, err := p.srv.Create(simpeer.ConfigMaps, benchConfigMap(fmt.Sprintf("cm-%s-%d", p.name, j))); err != nil {
				return 0, 0, err
			}
		}
	}
	return clusters, secrets, nil
}

// groupMember is a member of the simulated group as every peer knows it: its name, API
// server, kube-system UID, public key ("" when it has none) and shared reader
// kubeconfig.
type groupMember struct {
	name, url  string
	id         types.UID
	key        string
	kubeconfig []byte
}

// groupMembers returns the members of the simulated group: the real member first (its
// address a placeholder, its key memberKey's when there is one), then every peer.
func groupMembers(sims []simPeer, memberID types.UID, memberKey *seal.Key, ca []byte) ([]groupMember, error) {
	memberKC, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: memberName, Server: "https://127.0.0.1:1", CAData: ca, Token: serviceAccountToken("system:serviceaccount:" + v1alpha1.DefaultNamespace + ":cluster-registry-reader")})
	if err != nil {
		return nil, err
	}
	members := []groupMember{{name: memberName, url: "https://127.0.0.1:1", id: memberID, kubeconfig: memberKC}}
	if memberKey != nil {
		members[0].key = memberKey.PublicKey()
	}
	for _, p := range sims {
		members = append(members, groupMember{name: p.name, url: p.srv.URL(), id: p.srv.UID(), key: p.key.PublicKey(), kubeconfig: p.kubeconfig})
	}
	return members, nil
}

// put creates obj as a resource r of the peer.
func (p *simPeer) put(r simpeer.Resource, obj runtime.Object) error {
	m, err := toMap(obj)
	if err != nil {
		return err
	}
	_, err = p.srv.Create(r, m)
	return err
}

// serveMember makes the peer serve what it holds of the group's member m: its Cluster
// (kept in p.clusters for the heartbeats) and reader Secret, and, when m is not the
// peer itself, the credentials they issued each other. It returns the Secrets it made.
func (p *simPeer) serveMember(m groupMember, memberID types.UID, memberKey *seal.Key, ca []byte, now metav1.Time) (secrets int, err error) {
	local := m.name == p.name
	obj, err := toMap(simCluster(m, local, ca, now))
	if err != nil {
		return 0, err
	}
	p.clusters = append(p.clusters, runtime.DeepCopyJSON(obj))
	if _, err := p.srv.Create(simpeer.Clusters, obj); err != nil {
		return 0, err
	}
	if err := p.put(simpeer.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: v1alpha1.DefaultNamespace},
		Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.KubeconfigKey: m.kubeconfig}}); err != nil {
		return 0, err
	}
	secrets++
	if local {
		return secrets, nil
	}
	creds, err := p.credentials(m, memberID, memberKey, ca)
	if err != nil {
		return 0, err
	}
	for _, sec := range creds {
		if err := p.put(simpeer.Secrets, sec); err != nil {
			return 0, err
		}
		secrets++
	}
	return secrets, nil
}

// simCluster is the Cluster of the group's member m as a peer serves it: Local when it
// is the peer's own, a peer owned by m otherwise, ready, with every condition true.
func simCluster(m groupMember, local bool, ca []byte, now metav1.Time) *v1alpha1.Cluster {
	typ := v1alpha1.ClusterTypePeer
	if local {
		typ = v1alpha1.ClusterTypeLocal
	}
	cl := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Annotations: map[string]string{}},
		Spec: v1alpha1.ClusterSpec{ClusterID: m.id, AuthInfo: v1alpha1.AuthInfo{SecretRef: v1alpha1.NamespacedName{Name: m.name, Namespace: v1alpha1.DefaultNamespace}},
			KubernetesAPIEndpoints: []v1alpha1.KubernetesAPIEndpoint{{ServerAddress: m.url, CABundle: ca}}},
		Status: v1alpha1.ClusterStatus{State: v1alpha1.ClusterStateReady, Type: typ, ControllerVersion: "simulated",
			ClusterMetadata: v1alpha1.ClusterMetadata{Version: "v1.36.3", Provider: "kind", Distribution: "KIND"}, Conditions: simConditions(local, now)},
	}
	if m.key != "" {
		cl.Annotations[v1alpha1.ReaderPublicKeyAnnotation] = m.key
	}
	if !local {
		cl.Labels = map[string]string{v1alpha1.OwnershipLabel: string(m.id)}
		cl.Annotations[v1alpha1.OwnershipAnnotation] = string(m.id)
	}
	return cl
}

// simConditions are the conditions of a simulated member's Cluster: every one true,
// with a message as long as a real one's.
func simConditions(local bool, now metav1.Time) []v1alpha1.ClusterCondition {
	var out []v1alpha1.ClusterCondition
	for _, t := range []v1alpha1.ClusterConditionType{v1alpha1.ClusterConditionLocalCluster, v1alpha1.ClusterConditionMetadataSet, v1alpha1.ClusterConditionReady,
		v1alpha1.ClusterConditionClustersSynced, v1alpha1.ClusterConditionReaderKeyReady, v1alpha1.ClusterConditionReaderCredentialReady, v1alpha1.ClusterConditionRelaysAgree} {
		out = append(out, v1alpha1.ClusterCondition{Type: t, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now,
			Reason: "Simulated", Message: fmt.Sprintf("the condition %s of a simulated member (local %v), as long as a real one's message", t, local)})
	}
	return out
}

// credentials are the reader credentials between the peer and the group's member m (not
// the peer itself), as the peer keeps them: the one it issued m, sealed to m's key (one
// that opens for the real member when its key memberKey is known, random bytes of the
// same size otherwise), and the one m issued it.
func (p *simPeer) credentials(m groupMember, memberID types.UID, memberKey *seal.Key, ca []byte) ([]*corev1.Secret, error) {
	sealed := make([]byte, sealedSize)
	_, _ = rand.Read(sealed)
	if m.id == memberID && memberKey != nil {
		kc, err := kubeconfig.Render(kubeconfig.Reader{ClusterName: p.name, Server: p.srv.URL(), CAData: ca, Token: p.srv.Token()})
		if err != nil {
			return nil, err
		}
		if sealed, err = seal.Seal(m.key, p.srv.UID(), memberID, kc); err != nil {
			return nil, err
		}
	}
	issued := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.IssuedReaderSecretName(m.id), Namespace: v1alpha1.DefaultNamespace,
		Labels: map[string]string{v1alpha1.ReaderForLabel: v1alpha1.ReaderKey(m.id)}},
		Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.SealedKubeconfigKey: sealed}}
	if m.key != "" {
		issued.Annotations = map[string]string{v1alpha1.SealedToAnnotation: seal.Fingerprint(m.key)}
	}
	received := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ReceivedReaderSecretName(m.id), Namespace: v1alpha1.DefaultNamespace,
		Labels:      map[string]string{v1alpha1.ReaderFromLabel: v1alpha1.ReaderKey(m.id), v1alpha1.OwnershipLabel: string(m.id)},
		Annotations: map[string]string{v1alpha1.OwnershipAnnotation: string(m.id)}},
		Type: v1alpha1.SecretTypeClusterRegistry, Data: map[string][]byte{v1alpha1.SealedKubeconfigKey: sealed}}
	return []*corev1.Secret{issued, received}, nil
}
