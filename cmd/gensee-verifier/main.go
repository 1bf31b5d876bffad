// Command gensee-verifier is the JSON Schema judge of gensee verify
// json-schema, which starts it from beside itself (as trusted as gensee,
// run from the file that was checked). It is the only program of gensee's
// that links the JSON Schema library (shim/verifier/schema), so no gensee
// command pays that library's start-up, and it parses a workload's product
// with less than the CLI has.
//
// gensee starts it with an empty environment, only a stdin, a stdout and
// a stderr pipe, / as its working directory, SIGKILL should gensee die, a
// 60 s limit, and, when gensee runs as root, as uid and gid 65534 (nobody)
// without supplementary groups. It then sets no_new_privs on every thread,
// limits its address space to 4 GiB (its heap to 2.5), makes no core
// file, makes itself the first the kernel kills when the host runs out of
// memory, names itself, and judges one request.
//
// Protocol (package verifier: JudgeRequest, JudgeAnswer). stdin holds one
// request and nothing after it:
//
//	gensee-verifier/1 <schema bytes> <document bytes>\n<schema><document>
//
// a JSON Schema of at most 4 MiB (the --schema bound of gensee verify
// json-schema) and a document of at most 64 MiB (the gate's default
// max_bytes of a product). stdout gets one JSON object:
// {"problems":[...]} (an empty list is a pass), or {"schema_error":"..."}
// for a schema that does not compile, which includes a schema that refers
// to anything outside itself (a $ref to a file or a URL is never loaded).
// The exit status is 0 after either. Any other failure (a request that is
// not exactly that, the memory limit) is a message on stderr and a
// non-zero status, with nothing on stdout.
//
// It reads nothing but its stdin: no file, no network, no environment (it
// opens one file, its own /proc/self/oom_score_adj, to write it).
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/verifier/schema"
)

// maxAddressSpace bounds the judge's memory: a 64 MiB document parses into
// a tree of up to 40 times its size, and the Go runtime reserves 1.2 GiB
// of address space of its own. The garbage collector works to stay below
// maxHeap, so that the largest trees fit (a 64 MiB array of numbers is
// judged in 2.5 GiB, where it would take 3.5 unbounded); a document whose
// problems outgrow the limit ends the judge, not the host.
const (
	maxAddressSpace = 4 << 30
	maxHeap         = 5 << 29
)

func init() {
	// main runs on the main thread, whose name ps shows (harden).
	runtime.LockOSThread()
}

func main() {
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "gensee-verifier: started by gensee verify json-schema only, with no argument; it reads its request on stdin")
		os.Exit(2)
	}
	if err := harden(); err != nil {
		fmt.Fprintln(os.Stderr, "gensee-verifier:", err)
		os.Exit(1)
	}
	if err := schema.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gensee-verifier:", err)
		os.Exit(1)
	}
}

// harden takes from the judge what it never needs: no_new_privs on every
// thread (it executes nothing), memory past maxAddressSpace and core
// files; it makes itself the first the kernel kills when the host runs
// out of memory. gensee started it as /proc/self/fd/N, so it also names
// itself (its comm, which ps shows).
func harden() error {
	// Not dumpable: a process of another uid (and, with gensee's own uid
	// per judge, of any uid but root) may not trace it or open its
	// /proc/self/mem.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("clear dumpable: %w", err)
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); errno == unix.ENOTSUP {
		// A cgo build: the current thread only; main stays on it.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("set no_new_privs: %w", err)
		}
	} else if errno != 0 {
		return fmt.Errorf("set no_new_privs: %w", errno)
	}
	for _, l := range []struct {
		name     string
		resource int
		max      uint64
	}{{"address space", unix.RLIMIT_AS, maxAddressSpace}, {"core file size", unix.RLIMIT_CORE, 0}} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.resource, &cur); err != nil {
			return fmt.Errorf("get the %s limit: %w", l.name, err)
		}
		lim := unix.Rlimit{Cur: min(l.max, cur.Max), Max: min(l.max, cur.Max)}
		if err := unix.Setrlimit(l.resource, &lim); err != nil {
			return fmt.Errorf("limit the %s to %d: %w", l.name, lim.Max, err)
		}
	}
	debug.SetMemoryLimit(maxHeap)
	// The first the kernel kills when the host runs out of memory.
	os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	name := []byte("gensee-verifier\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	return nil
}
