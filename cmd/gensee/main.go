// Command gensee is the operator CLI of the gensee runtime: contracts,
// catalogs, inferences, observations and host audits (docs/design.md §9). The
// commands live in cmd/gensee/cli; this is wiring.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gensee/gensee/cmd/gensee/cli"
	"github.com/gensee/gensee/shim/hostrun/inner"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == inner.WrapperArg {
		os.Exit(inner.WrapperMain())
	}
	if len(os.Args) > 1 && os.Args[1] == inner.StageArg {
		os.Exit(inner.StageMain())
	}
	if len(os.Args) > 1 && os.Args[1] == inner.LingerArg {
		os.Exit(inner.LingerMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.OSEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
