package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// machineShare is where the machine's CPU went over a window of --mode peers: the
// member's controller, its API server, this bench process (the simulated peers serve
// from it) and the rest (etcd above all). It tells a window the member's own work
// bounds from one where the machine is saturated and every process waits for a core.
type machineShare struct {
	Seconds float64 `json:"seconds"`
	// Busy is the share of all the machine's cores that was not idle (0 to 1).
	Busy float64 `json:"busy"`
	// The CPU seconds of each process; Other is the machine's busy time less theirs.
	MemberCPU    float64 `json:"member_cpu_seconds"`
	APIServerCPU float64 `json:"api_server_cpu_seconds"`
	SimPeersCPU  float64 `json:"simulated_peers_cpu_seconds"`
	OtherCPU     float64 `json:"other_cpu_seconds"`
}

// machineReading is one reading of the counters a machineShare is the difference of.
type machineReading struct {
	at                      time.Time
	busy, total             float64 // machine-wide, in CPU seconds (/proc/stat)
	member, apiServer, self float64 // per process
}

// readMachine reads the counters: the member's controller is the process member (0
// before it is started: no CPU), its API server apiServer.
func readMachine(member, apiServer int) (machineReading, error) {
	r := machineReading{at: time.Now()}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return r, err
	}
	if r.busy, r.total, err = parseProcStat(string(data)); err != nil {
		return r, err
	}
	for _, p := range []struct {
		pid int
		out *float64
	}{{member, &r.member}, {apiServer, &r.apiServer}, {os.Getpid(), &r.self}} {
		if p.pid == 0 {
			continue
		}
		if *p.out, err = procCPU(p.pid); err != nil {
			return r, fmt.Errorf("CPU of process %d: %w", p.pid, err)
		}
	}
	return r, nil
}

// share is where the CPU went between the readings a and b.
func share(a, b machineReading) machineShare {
	s := machineShare{
		Seconds:      b.at.Sub(a.at).Seconds(),
		MemberCPU:    b.member - a.member,
		APIServerCPU: b.apiServer - a.apiServer,
		SimPeersCPU:  b.self - a.self,
	}
	busy := b.busy - a.busy
	if total := b.total - a.total; total > 0 {
		s.Busy = busy / total
	}
	s.OtherCPU = max(0, busy-s.MemberCPU-s.APIServerCPU-s.SimPeersCPU)
	return s
}

// String is the share as a step line prints it.
func (s machineShare) String() string {
	return fmt.Sprintf("%.1fs, machine %.0f%% busy: member %.1f s, its API server %.1f s, simulated peers %.1f s, rest %.1f s of CPU",
		s.Seconds, 100*s.Busy, s.MemberCPU, s.APIServerCPU, s.SimPeersCPU, s.OtherCPU)
}

// parseProcStat returns the busy and total CPU time of the machine, in seconds, from
// the "cpu" line of /proc/stat (user nice system idle iowait irq softirq steal ...,
// in USER_HZ): idle and iowait are not busy; guest time is already in user.
func parseProcStat(stat string) (busy, total float64, err error) {
	for line := range strings.SplitSeq(stat, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("/proc/stat cpu line has %d fields", len(f))
		}
		for i, s := range f[1:9] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat cpu field %q: %w", s, err)
			}
			total += float64(v)
			if i != 3 && i != 4 { // idle, iowait
				busy += float64(v)
			}
		}
		return busy / clockTicks, total / clockTicks, nil
	}
	return 0, 0, errors.New("/proc/stat has no cpu line")
}

// formatBytes lists bytes by resource, in MB, the largest first, and their total.
func formatBytes(bytes map[string]int64) string {
	keys := slices.SortedFunc(maps.Keys(bytes), func(a, b string) int {
		if c := cmp.Compare(bytes[b], bytes[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	var total int64
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f MB", k, float64(bytes[k])/1e6))
		total += bytes[k]
	}
	return fmt.Sprintf("%.1f MB: %s", float64(total)/1e6, strings.Join(parts, ", "))
}

// since returns the counters of after that grew since before, by how much.
func since(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
