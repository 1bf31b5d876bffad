// Command mkimage writes the test image archive: mkimage OUT BUSYBOX PROBE.
package main

import (
	"fmt"
	"os"

	"github.com/gensee/gensee/integration/testimage"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mkimage OUT.tar BUSYBOX PROBE")
		os.Exit(2)
	}
	if err := testimage.Write(os.Args[1], testimage.Options{Busybox: os.Args[2], Probe: os.Args[3]}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}
