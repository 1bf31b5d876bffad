// Command containerd-shim-gensee-v2 is the gensee runtime
// (io.containerd.gensee.v2): containerd's runc shim plus a kernel-enforced
// boundary around each container.
package main

import (
	"context"

	"github.com/containerd/containerd/v2/pkg/shim"

	"github.com/gensee/gensee/shim/service"
)

func main() {
	service.Register()
	shim.RunShim(context.Background(), service.NewManager(service.RuntimeName))
}
