// Command gensee-shim is the full gensee runtime (io.containerd.gensee.v2):
// containerd's runc shim plus a kernel-enforced boundary around each
// container. containerd runs it through containerd-shim-gensee-v2, the
// front installed beside it (shim/launcher), which starts it as the
// long-lived shim and hands it every call but `start` and the `delete` of
// a task it cleaned up.
package main

import (
	"context"
	"os"
	"runtime"

	"github.com/containerd/containerd/v2/pkg/shim"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/service"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == service.GateHelperArg {
		os.Exit(gate.HelperMain(os.Stdin, os.Stdout, os.Stderr))
	}
	capProcs()
	service.Preload()
	stop := startProfile()
	service.Register()
	shim.RunShim(context.Background(), service.NewManager(service.RuntimeName))
	stop()
}

// capProcs lowers GOMAXPROCS to the CPUs this process may run on. The
// front starts the shim with GOMAXPROCS=4, as containerd's runc manager
// does; on a node with fewer CPUs the extra Ps run nothing in parallel
// but each keeps its own caches (a span per size class, a page cache of
// up to 512 KiB, its idle threads' stacks): resident memory of every
// sleeping task's shim. It never raises the front's setting.
func capProcs() {
	if n := runtime.NumCPU(); runtime.GOMAXPROCS(0) > n {
		runtime.GOMAXPROCS(n)
	}
}
