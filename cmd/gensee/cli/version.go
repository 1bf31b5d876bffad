package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
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
				writeVersion(env.Stdout)
				return nil
			}
		},
	}
}

// writeVersion prints what gensee version and gensee --version print.
func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "gensee %s (%s %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
