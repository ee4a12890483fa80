package sizing

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

func TestNeedFor(t *testing.T) {
	tests := []struct {
		peers int
		want  Need
	}{
		{0, Need{192 * mib, 50}},
		{10, Need{192 * mib, 50}},
		{25, Need{192 * mib, 80}},
		{40, Need{231 * mib, 104}}, // 192 + 0.6*64 = 230.4 MiB, rounded up; 80 + 0.6*40 millicores
		{75, Need{288 * mib, 145}}, // halfway between 50 and 100
		{100, Need{320 * mib, 170}},
		{200, Need{(320 + 128) * mib, 270}}, // the last segment's slope: 1.28 MiB and 1m a peer
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, NeedFor(tt.peers)); diff != "" {
			t.Errorf("NeedFor(%d) (-want +got):\n%s", tt.peers, diff)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name       string
		in         Input
		wantStatus corev1.ConditionStatus
		wantReason string
	}{
		{"no limits", Input{Peers: 100}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
		{"the installed Deployment, 60 peers", Input{Peers: 60, MemoryLimit: 256 * mib}, corev1.ConditionFalse, v1alpha1.ReasonMemoryBelowSizing},
		{"the installed Deployment, 50 peers", Input{Peers: 50, MemoryLimit: 256 * mib}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
		{"the installed Deployment, 25 peers", Input{Peers: 25, MemoryLimit: 256 * mib}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
		{"the installed Deployment, 10 peers", Input{Peers: 10, MemoryLimit: 256 * mib}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
		{"CPU", Input{Peers: 100, MemoryLimit: 2 << 30, CPUMillis: 30}, corev1.ConditionFalse, v1alpha1.ReasonCPUBelowSizing},
		{"CPU, within", Input{Peers: 100, MemoryLimit: 2 << 30, CPUMillis: 500}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
		{"membership cap", Input{Peers: 30, MemoryLimit: 256 * mib, MaxMembershipObjects: 30}, corev1.ConditionFalse, v1alpha1.ReasonMembershipNearCap},
		{"membership cap, within", Input{Peers: 7, MaxMembershipObjects: 10}, corev1.ConditionTrue, v1alpha1.ReasonWithinSizing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Check(tt.in)
			if c.Type != v1alpha1.ClusterConditionWithinSizing || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.Message == "" {
				t.Errorf("Check(%+v) = %+v, want %s %s with a message", tt.in, c, tt.wantStatus, tt.wantReason)
			}
		})
	}
}

// TestTableMatchesDocs: the table is docs/controller.md's sizing table (memory limit and
// CPU request per peer count).
func TestTableMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "controller.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| [^|]+\| [^|]+\| [^|]+\| \d+Mi \| (\d+)Mi \| (\d+m|2 cores or more) \|$`)
	var got []point
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		peers, _ := strconv.Atoi(m[1])
		mem, _ := strconv.ParseInt(m[2], 10, 64)
		cpu := int64(2000)
		if m[3] != "2 cores or more" {
			cpu, _ = strconv.ParseInt(m[3][:len(m[3])-1], 10, 64)
		}
		got = append(got, point{peers, mem, cpu})
	}
	if diff := cmp.Diff(table, got, cmp.AllowUnexported(point{})); diff != "" {
		t.Errorf("sizing table of docs/controller.md (-code +docs):\n%s", diff)
	}
}

func TestCgroupCPULimit(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"none", nil, 0},
		{"v2 max", map[string]string{"sys/fs/cgroup/cpu.max": "max 100000\n"}, 0},
		{"v2 1.5 cores", map[string]string{"sys/fs/cgroup/cpu.max": "150000 100000\n"}, 1500},
		{"v1 500m", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "50000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 500},
		{"v1 none", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for f, data := range tt.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := CgroupCPULimit(root)
			if err != nil || got != tt.want {
				t.Errorf("CgroupCPULimit = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
