// Command gensee-sandbox is what runs inside a host run's namespaces before
// the command (`gensee boundary run`): the wrapper, pid 1 of the run, and
// the stage that drops every privilege and executes the sealed command
// (shim/hostrun/inner). gensee starts it; nobody else should. It is small
// and static so each start costs a few milliseconds.
package main

import (
	"fmt"
	"os"

	"github.com/gensee/gensee/shim/hostrun/inner"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case inner.WrapperArg:
			os.Exit(inner.WrapperMain())
		case inner.StageArg:
			os.Exit(inner.StageMain())
		case inner.LingerArg:
			os.Exit(inner.LingerMain())
		}
	}
	fmt.Fprintln(os.Stderr, "gensee-sandbox: started by gensee boundary run only")
	os.Exit(2)
}
