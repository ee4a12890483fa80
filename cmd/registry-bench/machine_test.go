package main

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stat        string
		busy, total float64
		wantErr     bool
	}{
		{name: "busy is all but idle and iowait",
			// user nice system idle iowait irq softirq steal guest guest_nice
			stat: "cpu  1000 100 300 5000 200 10 40 50 7 0\ncpu0 500 50 150 2500 100 5 20 25 3 0\n",
			busy: 15, total: 67},
		{name: "no cpu line", stat: "intr 1 2 3\n", wantErr: true},
		{name: "a short cpu line", stat: "cpu  1 2 3\n", wantErr: true},
		{name: "a field that is no number", stat: "cpu  1 2 3 x 5 6 7 8\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, total, err := parseProcStat(tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if busy != tc.busy || total != tc.total {
				t.Errorf("parseProcStat = %v, %v; want %v, %v", busy, total, tc.busy, tc.total)
			}
		})
	}
	// The machine this runs on has a cpu line that parses.
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skip("no /proc/stat:", err)
	}
	if busy, total, err := parseProcStat(string(data)); err != nil || busy <= 0 || total < busy {
		t.Errorf("parseProcStat(/proc/stat) = %v, %v, %v", busy, total, err)
	}
}

func TestShare(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := machineReading{at: t0, busy: 10, total: 40, member: 1, apiServer: 2, self: 3}
	b := machineReading{at: t0.Add(10 * time.Second), busy: 28, total: 60, member: 9, apiServer: 5, self: 5}
	want := machineShare{Seconds: 10, Busy: 0.9, MemberCPU: 8, APIServerCPU: 3, SimPeersCPU: 2, OtherCPU: 5}
	if diff := cmp.Diff(want, share(a, b)); diff != "" {
		t.Errorf("share (-want +got):\n%s", diff)
	}
	// Counters read at slightly different moments cannot make the rest negative.
	b.busy = 20
	if got := share(a, b).OtherCPU; got != 0 {
		t.Errorf("OtherCPU = %v, want 0 when the processes' CPU exceeds the machine's", got)
	}
}

func TestFormatBytes(t *testing.T) {
	got := formatBytes(map[string]int64{"v1/configmaps": 1_500_000, "v1/secrets": 30_000_000, "x/clusters": 20_000_000})
	want := "51.5 MB: v1/secrets 30.0 MB, x/clusters 20.0 MB, v1/configmaps 1.5 MB"
	if got != want {
		t.Errorf("formatBytes = %q, want %q", got, want)
	}
	// Equal sizes come in the order of their names.
	got = formatBytes(map[string]int64{"b": 1_000_000, "a": 1_000_000})
	want = "2.0 MB: a 1.0 MB, b 1.0 MB"
	if got != want {
		t.Errorf("formatBytes = %q, want %q", got, want)
	}
}

func TestSince(t *testing.T) {
	got := since(map[string]int64{"a": 1, "b": 5, "gone": 3}, map[string]int64{"a": 4, "b": 5, "new": 2})
	if diff := cmp.Diff(map[string]int64{"a": 3, "new": 2}, got); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
}
