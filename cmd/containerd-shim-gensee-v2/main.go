// Command containerd-shim-gensee-v2 is the gensee runtime
// (io.containerd.gensee.v2) as containerd runs it: a small front that
// answers `shim start` and `shim delete` for a task its shim cleaned up,
// and hands every other call to the full shim, gensee-shim, installed
// beside it (shim/launcher).
package main

import "github.com/gensee/gensee/shim/launcher"

func main() { launcher.Main() }
