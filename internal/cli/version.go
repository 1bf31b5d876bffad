package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"

	"github.com/gensee/gensee/internal/version"
)

func versionCommand() *Command {
	return &Command{
		Name:    "version",
		Summary: "print the gensee version",
		Args:    "",
		Setup: func(*flag.FlagSet) Runner {
			return func(_ context.Context, env *Env) error {
				fmt.Fprintf(env.Stdout, "gensee %s (%s %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
