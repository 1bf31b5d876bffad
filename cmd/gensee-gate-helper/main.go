// Command gensee-gate-helper runs one product gate and exits: a gate.Input
// as JSON on stdin, the gate.Result as JSON on stdout (gate.HelperMain).
// The shim starts it at task exit from the directory of its own binary;
// without it the shim re-executes itself as the helper, which costs the
// start-up of the whole shim on the exit path.
package main

import (
	"os"

	"github.com/gensee/gensee/shim/gate"
)

func main() {
	code := gate.HelperMain(os.Stdin, os.Stdout, os.Stderr)
	// The result is whole: the shim reads it at EOF, which closing stdout
	// gives now rather than after the process's teardown.
	os.Stdout.Close()
	os.Exit(code)
}
