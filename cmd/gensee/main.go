// Command gensee is the operator CLI of the gensee runtime: contracts,
// catalogs, inferences, observations and host audits (DESIGN §9). The
// commands live in internal/cli; this is wiring.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gensee/gensee/internal/cli"
	"github.com/gensee/gensee/shim/hostrun"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == hostrun.WrapperArg {
		os.Exit(hostrun.WrapperMain())
	}
	if len(os.Args) > 1 && os.Args[1] == hostrun.StageArg {
		os.Exit(hostrun.StageMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.OSEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
