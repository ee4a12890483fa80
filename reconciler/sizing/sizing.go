// Package sizing says whether a member's controller runs within the sizing
// docs/controller.md gives for the size of its group ("Sizing"), measured by
// `make bench-scale`: the memory and CPU one member needs grows with the number of peers it
// reads, and the membership cap (--max-peer-membership-objects) bounds how many members a
// group can have. Over the sizing, the controller says so on its local Cluster (condition
// WithinSizing), and the metric kubectl_registry_cluster_condition and the alert
// KubectlRegistryOverSizing carry it, before the controller is OOM-killed or falls behind.
// It is pure: the caller reads the cgroup limits (CgroupCPULimit, and the manager's
// CgroupMemoryLimit) and counts the peers.
package sizing

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-registry/kubectl-registry/reconciler/api/v1alpha1"
)

// Need is what a member of a group needs, as docs/controller.md's sizing table says.
type Need struct {
	// MemoryLimit is the container memory limit the table gives, in bytes.
	MemoryLimit int64
	// CPUMillis is the CPU request the table gives, in millicores.
	CPUMillis int64
}

// point is one row of docs/controller.md's sizing table (make bench-scale, 10,000 synced
// objects): the memory limit and the CPU request for a number of peers. Keep it equal to
// the table (TestTableMatchesDocs).
type point struct {
	peers     int
	memoryMiB int64
	cpuMillis int64
}

var table = []point{
	{10, 192, 50},
	{25, 192, 80},
	{50, 256, 120},
	{100, 320, 170},
}

const mib = 1 << 20

// NeedFor returns what a member with peers peers needs: the table's row, linear between
// rows, the first row below it and the last segment's slope beyond it (not measured
// there: the membership caches grow as the square of the group, so beyond 100 peers
// this is a floor).
func NeedFor(peers int) Need {
	if peers <= table[0].peers {
		return Need{MemoryLimit: table[0].memoryMiB * mib, CPUMillis: table[0].cpuMillis}
	}
	for i := 1; i < len(table); i++ {
		lo, hi := table[i-1], table[i]
		if peers <= hi.peers || i == len(table)-1 {
			f := float64(peers-lo.peers) / float64(hi.peers-lo.peers)
			mem := float64(lo.memoryMiB) + f*float64(hi.memoryMiB-lo.memoryMiB)
			cpu := float64(lo.cpuMillis) + f*float64(hi.cpuMillis-lo.cpuMillis)
			return Need{MemoryLimit: int64(math.Ceil(mem)) * mib, CPUMillis: int64(math.Ceil(cpu))}
		}
	}
	panic("unreachable")
}

// Input is what Check compares.
type Input struct {
	// Peers is the number of peers this member reads: the group's members but itself.
	Peers int
	// MemoryLimit and CPUMillis are the container's limits (bytes, millicores); 0 is none.
	MemoryLimit int64
	CPUMillis   int64
	// MaxMembershipObjects is --max-peer-membership-objects: a peer offering more
	// Clusters (or Secrets) than this is refused. 0 disables the check.
	MaxMembershipObjects int
}

// Limits are what this controller runs under, read once at start: the container's
// limits and --max-peer-membership-objects.
type Limits struct {
	// MemoryLimit and CPUMillis are the container's limits (bytes, millicores); 0 is none.
	MemoryLimit int64
	CPUMillis   int64
	// MaxMembershipObjects is --max-peer-membership-objects.
	MaxMembershipObjects int
}

// For returns the Input of a member with peers peers under l.
func (l Limits) For(peers int) Input {
	return Input{Peers: peers, MemoryLimit: l.MemoryLimit, CPUMillis: l.CPUMillis, MaxMembershipObjects: l.MaxMembershipObjects}
}

// Peers counts the peers a member reads among the Clusters it holds: every Cluster but
// its own (clusterID local) and the disabled ones.
func Peers(clusters []v1alpha1.Cluster, local types.UID) int {
	n := 0
	for i := range clusters {
		if clusters[i].Spec.ClusterID != local && !clusters[i].Disabled() {
			n++
		}
	}
	return n
}

// membershipHeadroom is the fraction of --max-peer-membership-objects a group may reach
// before Check warns: every member holds a Cluster per member, so the group's size
// approaches the cap as it grows.
const membershipHeadroom = 0.8

// Check returns the WithinSizing condition of the local Cluster for in: True within the
// sizing, False with the first limit the group is over and what to do.
func Check(in Input) v1alpha1.ClusterCondition {
	need := NeedFor(in.Peers)
	members := in.Peers + 1
	c := v1alpha1.ClusterCondition{Type: v1alpha1.ClusterConditionWithinSizing, Status: corev1.ConditionFalse}
	switch {
	case in.MaxMembershipObjects > 0 && float64(members) > membershipHeadroom*float64(in.MaxMembershipObjects):
		c.Reason = v1alpha1.ReasonMembershipNearCap
		c.Message = fmt.Sprintf("the group has %d members, over %d%% of --max-peer-membership-objects (%d): every member holds a Cluster per member, and a peer offering more than the cap is refused. Raise --max-peer-membership-objects on every member (docs/controller.md, Sizing)",
			members, int(membershipHeadroom*100), in.MaxMembershipObjects)
	case in.MemoryLimit > 0 && in.MemoryLimit < need.MemoryLimit:
		c.Reason = v1alpha1.ReasonMemoryBelowSizing
		c.Message = fmt.Sprintf("%d peers need a memory limit of about %dMi (docs/controller.md, Sizing); this controller's is %dMi: it may be OOM-killed at its first full sync or a burst. Raise the Deployment's memory limit",
			in.Peers, need.MemoryLimit/mib, in.MemoryLimit/mib)
	case in.CPUMillis > 0 && in.CPUMillis < need.CPUMillis:
		c.Reason = v1alpha1.ReasonCPUBelowSizing
		c.Message = fmt.Sprintf("%d peers need about %dm of CPU (docs/controller.md, Sizing); this controller's limit is %dm: it falls behind the peers' changes. Raise the Deployment's CPU limit, or lengthen --heartbeat-period on every member",
			in.Peers, need.CPUMillis, in.CPUMillis)
	default:
		c.Status = corev1.ConditionTrue
		c.Reason = v1alpha1.ReasonWithinSizing
		c.Message = fmt.Sprintf("%d peers: within the sizing of docs/controller.md (memory limit about %dMi, CPU about %dm)", in.Peers, need.MemoryLimit/mib, need.CPUMillis)
	}
	return c
}

// CgroupCPULimit returns the CPU limit of the process's cgroup in millicores, read under
// root: cgroup v2's cpu.max ("QUOTA PERIOD"), else cgroup v1's cfs quota and period. It
// returns 0 when there is no limit or no cgroup file.
func CgroupCPULimit(root string) (int64, error) {
	data, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup/cpu.max"))
	switch {
	case err == nil:
		f := strings.Fields(string(data))
		if len(f) != 2 || f[0] == "max" {
			return 0, nil
		}
		return millis(f[0], f[1])
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("reading the cgroup CPU limit: %w", err)
	}
	quota, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the cgroup CPU limit: %w", err)
	}
	period, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us"))
	if err != nil {
		return 0, fmt.Errorf("reading the cgroup CPU period: %w", err)
	}
	q := strings.TrimSpace(string(quota))
	if strings.HasPrefix(q, "-") {
		return 0, nil
	}
	return millis(q, strings.TrimSpace(string(period)))
}

// millis returns quota/period in millicores.
func millis(quota, period string) (int64, error) {
	q, err := strconv.ParseInt(quota, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading the cgroup CPU limit: quota %q is not a number", quota)
	}
	p, err := strconv.ParseInt(period, 10, 64)
	if err != nil || p <= 0 {
		return 0, fmt.Errorf("reading the cgroup CPU limit: period %q is not a positive number", period)
	}
	return q * 1000 / p, nil
}
