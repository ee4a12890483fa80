package manager

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    int64
		wantErr string
	}{
		{name: "no cgroup files", want: 0},
		{name: "v2 limit", files: map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"}, want: 256 << 20},
		{name: "v2 no limit", files: map[string]string{"sys/fs/cgroup/memory.max": "max\n"}, want: 0},
		{name: "v1 limit", files: map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "134217728\n"}, want: 128 << 20},
		{name: "v1 no limit", files: map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, want: 0},
		{name: "v2 wins over v1", files: map[string]string{"sys/fs/cgroup/memory.max": "1048576", "sys/fs/cgroup/memory/memory.limit_in_bytes": "2097152"}, want: 1 << 20},
		{name: "garbage", files: map[string]string{"sys/fs/cgroup/memory.max": "lots"}, wantErr: `"lots" is not a number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for f, content := range tc.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := CgroupMemoryLimit(root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("CgroupMemoryLimit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestApplyMemory: the GC target is set, the soft limit follows the cgroup's limit
// unless GOMEMLIMIT is set, and nothing is set from a cgroup without a limit.
func TestApplyMemory(t *testing.T) {
	oldGC := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(oldGC)
		debug.SetMemoryLimit(oldLimit)
	})
	const cgroupLimit = 256 << 20
	ratio := 0.9 // a variable: the limit is computed in float64 as ApplyMemory does
	withLimit := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withLimit, "sys/fs/cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withLimit, "sys/fs/cgroup/memory.max"), []byte("268435456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		opts       MemoryOptions
		root       string
		gomemlimit bool
		want       MemorySettings
	}{
		{name: "defaults in a container", opts: MemoryOptions{GCPercent: 50, LimitRatio: 0.9}, root: withLimit,
			want: MemorySettings{GCPercent: 50, Limit: int64(float64(cgroupLimit) * ratio), CgroupLimit: 256 << 20}},
		{name: "no cgroup limit", opts: MemoryOptions{GCPercent: 50, LimitRatio: 0.9}, root: t.TempDir(),
			want: MemorySettings{GCPercent: 50, Limit: math.MaxInt64}},
		{name: "ratio 0: no limit", opts: MemoryOptions{GCPercent: 70}, root: withLimit,
			want: MemorySettings{GCPercent: 70, Limit: math.MaxInt64, CgroupLimit: 256 << 20}},
		{name: "GOMEMLIMIT set: kept", opts: MemoryOptions{GCPercent: 50, LimitRatio: 0.9}, root: withLimit, gomemlimit: true,
			want: MemorySettings{GCPercent: 50, Limit: math.MaxInt64, CgroupLimit: 256 << 20}},
		{name: "GC percent 0: the runtime's kept", opts: MemoryOptions{}, root: t.TempDir(),
			want: MemorySettings{GCPercent: 100, Limit: math.MaxInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			if tc.gomemlimit {
				t.Setenv("GOMEMLIMIT", "9223372036854775807")
			}
			got, err := ApplyMemory(tc.opts, tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if gc := debug.SetGCPercent(100); gc != tc.want.GCPercent {
				t.Errorf("the runtime's GC percent is %d, want %d", gc, tc.want.GCPercent)
			}
		})
	}
}

func TestMemoryOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts MemoryOptions
		want string
	}{
		{opts: MemoryOptions{GCPercent: 50, LimitRatio: 0.9}},
		{opts: MemoryOptions{}},
		{opts: MemoryOptions{GCPercent: -1}, want: "the GC percent must be from 1 to 10000"},
		{opts: MemoryOptions{LimitRatio: 1.5}, want: "the memory limit ratio must be from 0 (none) to 1, got 1.5"},
		{opts: MemoryOptions{LimitRatio: math.NaN()}, want: "the memory limit ratio must be from 0"},
	} {
		err := tc.opts.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
}
