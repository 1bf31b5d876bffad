// Command gensee-runc is the runc the gensee shim hands containerd's runc
// task service: it starts a created container and deletes a stopped one
// itself, as runc would, and runs the real runc for every other call
// (shim/runcfront). The shim runs it; nobody else should.
package main

import "github.com/gensee/gensee/shim/runcfront"

func main() { runcfront.Main() }
