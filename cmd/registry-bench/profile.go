package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-registry/kubectl-registry/plugin"
)

// With --profile the controllers of the main group are this binary, re-executed with
// envRunPlugin set: it then runs the plugin's command tree exactly as cmd/kubectl-registry
// does (same packages, built from the same checkout), and profiles on signals, since serve
// has no pprof endpoint:
//
//	SIGUSR1  start a CPU profile, written to $REGISTRY_BENCH_PROFILE.cpu.pprof
//	SIGUSR2  stop it (if started), then write a heap profile to $REGISTRY_BENCH_PROFILE.heap.pprof
//	         and a goroutine profile to $REGISTRY_BENCH_PROFILE.goroutine.pprof
//
// The bench sends SIGUSR1 just before the registry burst and SIGUSR2 once the burst is on
// every peer, so the CPU profile covers exactly the burst (files NAME.burst.*.pprof); and
// SIGUSR2 again once the memory step's objects are synced (NAME.memory.heap.pprof).
//
// With envProfileStart set (--mode peers) the CPU profile starts with the process, as if
// SIGUSR1 came first: the member's first sync and its restart are profiled from the start.
const (
	envRunPlugin    = "REGISTRY_BENCH_RUN_PLUGIN"
	envProfile      = "REGISTRY_BENCH_PROFILE"
	envProfileStart = "REGISTRY_BENCH_PROFILE_START"
)

// runPlugin is main for a controller started with --profile.
func runPlugin() int {
	return plugin.Main(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, func(ctx context.Context) {
		if prefix := os.Getenv(envProfile); prefix != "" {
			// Sample every 4 KiB allocated rather than every 512 KiB: the heap profiles at
			// 10,000 objects must tell apart caches of a few MB.
			runtime.MemProfileRate = 4096
			go profileOnSignals(ctx, prefix)
		}
	})
}

func profileOnSignals(ctx context.Context, prefix string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	var cpu *os.File
	if os.Getenv(envProfileStart) != "" {
		cpu = startCPUProfile(prefix)
	}
	for {
		select {
		case <-ctx.Done():
			if cpu != nil {
				pprof.StopCPUProfile()
				_ = cpu.Close()
			}
			return
		case s := <-sigs:
			switch s {
			case syscall.SIGUSR1:
				if cpu == nil {
					cpu = startCPUProfile(prefix)
				}
			case syscall.SIGUSR2:
				if cpu != nil {
					pprof.StopCPUProfile()
					_ = cpu.Close()
					cpu = nil
				}
				// The goroutines first: the bench waits for the heap profile.
				if err := writeProfile(prefix+".goroutine.pprof", "goroutine"); err != nil {
					fmt.Fprintln(os.Stderr, "bench profile:", err)
				}
				if err := writeHeap(prefix + ".heap.pprof"); err != nil {
					fmt.Fprintln(os.Stderr, "bench profile:", err)
				}
			}
		}
	}
}

// startCPUProfile starts the CPU profile to PREFIX.cpu.pprof, and returns its file, or
// nil when it cannot (said on stderr).
func startCPUProfile(prefix string) *os.File {
	f, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench profile:", err)
		return nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "bench profile:", err)
		_ = f.Close()
		return nil
	}
	return f
}

// writeProfile writes the named runtime profile (pprof.Lookup) to path.
func writeProfile(path, name string) error {
	p := pprof.Lookup(name)
	if p == nil {
		return fmt.Errorf("no profile %q", name)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func writeHeap(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path) // the bench waits for path
}

// startProfiles sends SIGUSR1 to the profiled controllers.
func (g *group) startProfiles() {
	for _, c := range g.ctrls {
		if c.profile != "" {
			_ = os.Remove(c.profile + ".heap.pprof")
			_ = c.cmd.Process.Signal(syscall.SIGUSR1)
		}
	}
}

// stopProfiles sends SIGUSR2 to the profiled controllers, waits for their heap profiles and
// renames the profiles to PREFIX.TAG.{cpu,heap,goroutine}.pprof; it returns the files.
func (g *group) stopProfiles(tag string) []string {
	var files []string
	for _, c := range g.ctrls {
		if c.profile == "" {
			continue
		}
		_ = c.cmd.Process.Signal(syscall.SIGUSR2)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(c.profile + ".heap.pprof"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, kind := range []string{"cpu", "heap", "goroutine"} {
			from, to := c.profile+"."+kind+".pprof", c.profile+"."+tag+"."+kind+".pprof"
			if err := os.Rename(from, to); err == nil {
				files = append(files, to)
			}
		}
	}
	return files
}
