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

func main() { os.Exit(gate.HelperMain(os.Stdin, os.Stdout, os.Stderr)) }
