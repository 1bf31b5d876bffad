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

	"github.com/containerd/containerd/v2/pkg/shim"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/service"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == service.GateHelperArg {
		os.Exit(gate.HelperMain(os.Stdin, os.Stdout, os.Stderr))
	}
	stop := startProfile()
	service.Register()
	shim.RunShim(context.Background(), service.NewManager(service.RuntimeName))
	stop()
}
