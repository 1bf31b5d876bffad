package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// profileEnv names a directory: when set in the shim's environment (the
// daemon's), every shim process writes a line of its resource usage (CPU
// time, GC cycles, bytes allocated) and an allocation profile there when it
// ends; with profileCPUEnv set too, a CPU profile (at that many Hz in the
// long-lived shim); with profileHeapEnv (a duration), a heap profile and
// the runtime's memory statistics that long after the process started. A measuring aid for issue 13's bench work, off unless
// asked for: never set it on a production daemon.
const (
	profileEnv     = "GENSEE_PROFILE"
	profileCPUEnv  = "GENSEE_PROFILE_CPU_HZ"
	profileHeapEnv = "GENSEE_PROFILE_HEAP_AFTER"
)

// startProfile starts the CPU profile if asked for and returns what to run
// at the end of main.
func startProfile() func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	t0 := time.Now()
	base := filepath.Join(dir, fmt.Sprintf("%d-%d", t0.UnixNano(), os.Getpid()))
	var cpu *os.File
	if hz, _ := strconv.Atoi(os.Getenv(profileCPUEnv)); hz > 0 {
		if a := os.Args[len(os.Args)-1]; hz != 100 && a != "start" && a != "delete" {
			// The long-lived shim only: StartCPUProfile then warns on
			// stderr, which the start action's caller reads as its reply.
			runtime.SetCPUProfileRate(hz)
		}
		if f, err := os.Create(base + ".cpu.pprof"); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				cpu = f
			} else {
				f.Close()
			}
		}
	}
	if d, err := time.ParseDuration(os.Getenv(profileHeapEnv)); err == nil {
		// The resident heap of a settled shim (a sleeping task's): P5.
		// A finer sample rate (GENSEE_PROFILE_MEMRATE=1024 sees a
		// shim's few MB) costs memory itself: off by default.
		if r, err := strconv.Atoi(os.Getenv("GENSEE_PROFILE_MEMRATE")); err == nil && r > 0 {
			runtime.MemProfileRate = r
		}
		time.AfterFunc(d, func() {
			writeProfile(base+".heap.pprof", "heap")
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			writeLine(base+".heap.json", map[string]any{"heap_inuse": ms.HeapInuse, "heap_idle": ms.HeapIdle,
				"heap_released": ms.HeapReleased, "stack_inuse": ms.StackInuse, "sys": ms.Sys, "num_gc": ms.NumGC,
				"mspan_inuse": ms.MSpanInuse, "gc_sys": ms.GCSys, "other_sys": ms.OtherSys, "goroutines": runtime.NumGoroutine()})
		})
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
		writeProfile(base+".allocs.pprof", "allocs")
		var ru unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &ru)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		writeLine(base+".usage.json", map[string]any{
			"args": os.Args[1:], "wall_ms": time.Since(t0).Milliseconds(),
			"utime_ms": float64(ru.Utime.Nano()) / 1e6, "stime_ms": float64(ru.Stime.Nano()) / 1e6,
			"maxrss_kib": ru.Maxrss, "num_gc": ms.NumGC, "total_alloc": ms.TotalAlloc, "heap_sys": ms.HeapSys,
		})
	}
}

// writeProfile writes the runtime profile name to file path, if it can:
// a measuring aid fails quietly.
func writeProfile(path, name string) {
	if f, err := os.Create(path); err == nil {
		pprof.Lookup(name).WriteTo(f, 0)
		f.Close()
	}
}

// writeLine writes v to file path as one line of JSON.
func writeLine(path string, v map[string]any) {
	line, _ := json.Marshal(v)
	os.WriteFile(path, append(line, '\n'), 0o644)
}
