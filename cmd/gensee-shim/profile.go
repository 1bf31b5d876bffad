//go:build gensee_profile

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// profileEnv names a directory: when set in the shim's environment (the
// daemon's), every shim process writes a line of its resource usage (CPU
// time, GC cycles, bytes allocated) and an allocation profile there when it
// ends; with profileCPUEnv set too, a CPU profile (at that many Hz in the
// long-lived shim); with profileTraceEnv, an execution trace (go tool
// trace) of the whole process; with profileHeapEnv (a duration), a heap and a
// goroutine profile, the runtime's memory statistics and classes and the
// process's /proc/self/smaps that long after the process started. A
// measuring aid for the bench (issues 13 and 31), compiled in only with
// -tags gensee_profile (GOFLAGS=-tags=gensee_profile make build) and off
// unless asked for: never build it into a production shim. Linking
// runtime/pprof turns the runtime's heap profiling on in every shim
// process (a sampled allocation's stack, recorded for the process's life:
// resident memory of a sleeping task's shim); the stock runc shim links
// none, and without this tag neither does ours (noprofile.go).
const (
	profileEnv     = "GENSEE_PROFILE"
	profileCPUEnv  = "GENSEE_PROFILE_CPU_HZ"
	profileHeapEnv = "GENSEE_PROFILE_HEAP_AFTER"
	// profileTraceEnv: when set, each shim process writes an execution
	// trace (go tool trace) of its whole life.
	profileTraceEnv = "GENSEE_PROFILE_TRACE"
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
	var tr *os.File
	if os.Getenv(profileTraceEnv) != "" {
		if f, err := os.Create(base + ".trace"); err == nil {
			if trace.Start(f) == nil {
				tr = f
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
			// The kernel's view first (per mapping: the binary's
			// text and rodata, the heap arena, the runtime's
			// off-heap), before the profiles below touch more.
			if b, err := os.ReadFile("/proc/self/smaps"); err == nil {
				os.WriteFile(base+".smaps", b, 0o644)
			}
			writeProfile(base+".heap.pprof", "heap")
			writeProfile(base+".goroutine.pprof", "goroutine")
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			line := map[string]any{"heap_inuse": ms.HeapInuse, "heap_idle": ms.HeapIdle,
				"heap_released": ms.HeapReleased, "stack_inuse": ms.StackInuse, "sys": ms.Sys, "num_gc": ms.NumGC,
				"mspan_inuse": ms.MSpanInuse, "gc_sys": ms.GCSys, "other_sys": ms.OtherSys, "goroutines": runtime.NumGoroutine()}
			// Every memory class the runtime counts (what a
			// memory limit sees), by its metric name.
			for _, m := range metrics.All() {
				if strings.HasPrefix(m.Name, "/memory/classes/") {
					s := []metrics.Sample{{Name: m.Name}}
					metrics.Read(s)
					if s[0].Value.Kind() == metrics.KindUint64 {
						line[m.Name] = s[0].Value.Uint64()
					}
				}
			}
			writeLine(base+".heap.json", line)
		})
	}
	return func() {
		if tr != nil {
			trace.Stop()
			tr.Close()
		}
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
