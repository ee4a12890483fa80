package manager

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGCPercent is the garbage collector's target of the controller (GOGC): the heap
// may grow by half of the live heap before a collection, instead of Go's default of all
// of it. The controller's live heap is mostly its caches of the synced objects, so the
// default doubles the peak memory at 10,000 objects for a GC that costs a few percent of
// a core; 50 gives that back for about twice that GC time (see `make bench`).
const DefaultGCPercent = 50

// DefaultMemoryLimitRatio is the fraction of a cgroup memory limit (a container's
// limits.memory) the controller sets as its Go soft memory limit (GOMEMLIMIT), so that
// the garbage collector works harder before the kernel kills the container.
const DefaultMemoryLimitRatio = 0.9

// MemoryOptions tune the Go runtime's memory use of the controller process.
type MemoryOptions struct {
	// GCPercent is the garbage collector's target; 0 leaves the runtime's (GOGC or 100).
	GCPercent int
	// LimitRatio is the fraction of the cgroup memory limit set as the soft memory limit;
	// 0 sets none. A limit set with GOMEMLIMIT is kept.
	LimitRatio float64
}

// Validate reports invalid memory options.
func (o MemoryOptions) Validate() error {
	var errs []error
	if o.GCPercent < 0 || o.GCPercent > 10000 {
		errs = append(errs, fmt.Errorf("the GC percent must be from 1 to 10000 (0 keeps GOGC or Go's default), got %d", o.GCPercent))
	}
	if math.IsNaN(o.LimitRatio) || o.LimitRatio < 0 || o.LimitRatio > 1 {
		errs = append(errs, fmt.Errorf("the memory limit ratio must be from 0 (none) to 1, got %v", o.LimitRatio))
	}
	return errors.Join(errs...)
}

// MemorySettings are what ApplyMemory set, for the log.
type MemorySettings struct {
	// GCPercent is the garbage collector's target in force.
	GCPercent int
	// Limit is the soft memory limit in bytes in force (math.MaxInt64 for none);
	// CgroupLimit is the cgroup's memory limit (0 for none or unknown).
	Limit, CgroupLimit int64
}

// ApplyMemory sets the process's garbage collector target and soft memory limit from o,
// the environment (GOMEMLIMIT wins over a limit from the cgroup) and the cgroup memory
// limit read under root ("/" in a container). It changes process-wide runtime settings:
// only the serve command calls it.
func ApplyMemory(o MemoryOptions, root string) (MemorySettings, error) {
	if o.GCPercent > 0 {
		debug.SetGCPercent(o.GCPercent)
	}
	s := MemorySettings{GCPercent: debug.SetGCPercent(-1)}
	debug.SetGCPercent(s.GCPercent)
	limit, err := CgroupMemoryLimit(root)
	if err != nil {
		return s, err
	}
	s.CgroupLimit = limit
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && limit > 0 && o.LimitRatio > 0 {
		debug.SetMemoryLimit(int64(float64(limit) * o.LimitRatio))
	}
	s.Limit = debug.SetMemoryLimit(-1)
	return s, nil
}

// CgroupMemoryLimit returns the memory limit of the process's cgroup in bytes, read under
// root: cgroup v2's memory.max, else cgroup v1's memory.limit_in_bytes. It returns 0 when
// there is no limit or no cgroup file (not in a container, or another layout).
func CgroupMemoryLimit(root string) (int64, error) {
	for _, f := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading the cgroup memory limit: %w", err)
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading the cgroup memory limit %s: %q is not a number of bytes", f, v)
		}
		if n <= 0 || n >= 1<<62 { // cgroup v1 writes about 2^63 for no limit
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}
