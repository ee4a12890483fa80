package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the registry costs the clusters it runs in: the CPU of the API servers (read from
// their processes), the CPU of the controllers and the watch events the API servers
// deliver, over a window of work, per 1,000 objects of that work.

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU seconds (user and system) a process has used, from
// /proc/<pid>/stat.
func procCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat line. The
// command (field 2) is in parentheses and may hold spaces: fields are counted after its
// closing parenthesis.
func parseStatCPU(stat string) (float64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("no command in /proc stat")
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat has %d fields after the command", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat field %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / clockTicks, nil
}

// apiServerPID finds the kube-apiserver process that serves on the port of serverURL
// (https://127.0.0.1:PORT): the one whose command line has --secure-port=PORT.
func apiServerPID(serverURL string) (int, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return 0, err
	}
	want := "--secure-port=" + u.Port()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil || !bytes.Contains(data, []byte("kube-apiserver")) {
			continue
		}
		args := strings.Split(string(data), "\x00")
		for i, a := range args {
			if a == want || (a == "--secure-port" && i+1 < len(args) && args[i+1] == u.Port()) {
				pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				if err != nil {
					return 0, err
				}
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s", want)
}

// watchEvents sums apiserver_watch_events_total of the resource: the events the API
// server sent to watchers of it.
func watchEvents(ss []series, resource string) float64 {
	var n float64
	for _, s := range ss {
		if s.name == "apiserver_watch_events_total" && s.labels["resource"] == resource {
			n += s.value
		}
	}
	return n
}

// reading is what the cost counters read at one moment.
type reading struct {
	at             time.Time
	apiServerCPU   float64
	controllersCPU float64
	watchEvents    float64
}

// read takes a reading of every API server and controller of the group.
func (g *group) read(ctx context.Context) (reading, error) {
	r := reading{at: time.Now()}
	for _, n := range g.names {
		pid, ok := g.apiPIDs[n]
		if !ok {
			var err error
			if pid, err = apiServerPID(g.bed.Cluster(n).APIServerURL()); err != nil {
				return r, fmt.Errorf("%s: %w", n, err)
			}
			g.apiPIDs[n] = pid
		}
		cpu, err := procCPU(pid)
		if err != nil {
			return r, fmt.Errorf("%s: API server CPU: %w", n, err)
		}
		r.apiServerCPU += cpu
		raw, err := g.cs[n].CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return r, fmt.Errorf("%s: API server metrics: %w", n, err)
		}
		r.watchEvents += watchEvents(parseMetrics(string(raw)), "configmaps")
	}
	for _, c := range g.ctrls {
		cpu, err := procCPU(c.cmd.Process.Pid)
		if err != nil {
			return r, fmt.Errorf("%s: controller CPU: %w", c.name, err)
		}
		r.controllersCPU += cpu
	}
	return r, nil
}

// cost is what a window of work cost the group, per 1,000 objects (or changes) of it,
// beyond what the group spends idle: the rate of an idle window just before the work is
// subtracted (a negative difference, noise, counts as 0). The idle rates are kept too.
type cost struct {
	// Objects are the objects synced (or the changes made) in the window.
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
	// IdleAPIServerCores and IdleControllersCores are the CPU the API servers and the
	// controllers used per second in the idle window before the work (cores);
	// IdleWatchEventsPerSecond the ConfigMap watch events sent meanwhile.
	IdleAPIServerCores       float64 `json:"idle_apiserver_cores"`
	IdleControllersCores     float64 `json:"idle_controllers_cores"`
	IdleWatchEventsPerSecond float64 `json:"idle_watch_events_per_second"`
	// APIServerCPUSeconds is the CPU of every API server of the group, per 1,000 objects.
	APIServerCPUSeconds float64 `json:"apiserver_cpu_seconds_per_1000"`
	// ControllersCPUSeconds is the CPU of every registry controller, per 1,000 objects (0
	// with the controllers stopped).
	ControllersCPUSeconds float64 `json:"controllers_cpu_seconds_per_1000"`
	// WatchEvents are the ConfigMap watch events the API servers sent, per 1,000 objects.
	WatchEvents float64 `json:"watch_events_per_1000"`
}

// newCost computes the cost of the work between before and after, with idle the reading
// that started the idle window ending at before.
func newCost(idle, before, after reading, objects int) *cost {
	idleSec := before.at.Sub(idle.at).Seconds()
	sec := after.at.Sub(before.at).Seconds()
	rate := func(f func(reading) float64) float64 { return ratio(f(before)-f(idle), idleSec) }
	per := func(f func(reading) float64) float64 {
		return ratio(1000*max(0, f(after)-f(before)-rate(f)*sec), float64(objects))
	}
	api := func(r reading) float64 { return r.apiServerCPU }
	ctl := func(r reading) float64 { return r.controllersCPU }
	ev := func(r reading) float64 { return r.watchEvents }
	return &cost{
		Objects: objects, Seconds: sec,
		IdleAPIServerCores: rate(api), IdleControllersCores: rate(ctl), IdleWatchEventsPerSecond: rate(ev),
		APIServerCPUSeconds: per(api), ControllersCPUSeconds: per(ctl), WatchEvents: per(ev),
	}
}

// idleWindow is how long the group is read idle before a window of work.
const idleWindow = 3 * time.Second

// idleReadings reads the group, waits idleWindow and reads it again.
func (g *group) idleReadings(ctx context.Context) (idle, before reading, err error) {
	if idle, err = g.read(ctx); err != nil {
		return idle, before, err
	}
	select {
	case <-time.After(idleWindow):
	case <-ctx.Done():
		return idle, before, ctx.Err()
	}
	before, err = g.read(ctx)
	return idle, before, err
}

// costs are the cost figures of one group: the work of syncing objects, and changes of
// objects that no rule selects.
type costs struct {
	// Synced: a burst synced by the registry (controllers running), and the same burst
	// copied by the floor with the controllers stopped.
	SyncedRegistry   *cost `json:"synced_registry,omitempty"`
	SyncedFloorAlone *cost `json:"synced_floor_alone,omitempty"`
	// Unselected: ConfigMaps that no rule selects, in the rule's namespace, created,
	// updated and deleted (three changes each), with the controllers stopped and running.
	UnselectedAlone    *cost `json:"unselected_controllers_stopped,omitempty"`
	UnselectedRegistry *cost `json:"unselected_controllers_running,omitempty"`
}

// measureCost runs work between two readings (the second after settle, so that work the
// controllers queue is counted) and returns its cost per 1,000 objects; a reading that
// fails is reported and gives no figure.
func (g *group) measureCost(ctx context.Context, objects int, work func(context.Context) error) (*cost, error) {
	idle, before, err := g.idleReadings(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		step("[%s] cost not measured: %v", g.label, err)
		before = reading{}
	}
	if err := work(ctx); err != nil {
		return nil, err
	}
	time.Sleep(costSettle)
	after, rerr := g.read(ctx)
	if rerr != nil || before.at.IsZero() {
		if rerr != nil {
			step("[%s] cost not measured: %v", g.label, rerr)
		}
		return nil, nil
	}
	return newCost(idle, before, after, objects), nil
}

// costSettle is how long after a window's work the second reading is taken.
const costSettle = 2 * time.Second

// unselectedLabel marks the bench's ConfigMaps that the bench rule selects; the
// unselected ones lack it.
const syncLabel = "bench.kubectl-registry.io/sync"

// churnUnselected creates, updates and deletes n ConfigMaps in namespace ns of the origin
// that no rule selects (no sync label), with the bench's workers: 3n changes.
func (g *group) churnUnselected(ctx context.Context, ns, prefix string, n int) error {
	cms := g.origin().CoreV1().ConfigMaps(ns)
	objs := names(prefix, 0, n)
	for _, op := range []string{"create", "update", "delete"} {
		work := make(chan string)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range g.b.o.workers {
			wg.Go(func() {
				for name := range work {
					var err error
					obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": op, "payload": "unselected"}}
					switch op {
					case "create":
						_, err = cms.Create(ctx, obj, metav1.CreateOptions{})
					case "update":
						_, err = cms.Update(ctx, obj, metav1.UpdateOptions{})
					case "delete":
						err = cms.Delete(ctx, name, metav1.DeleteOptions{})
					}
					if err != nil {
						mu.Lock()
						firstErr = firstNonNil(firstErr, fmt.Errorf("%s %s/%s: %w", op, ns, name, err))
						mu.Unlock()
					}
				}
			})
		}
		for _, name := range objs {
			work <- name
		}
		close(work)
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	return nil
}
