// Command euid prints its effective uid the way critest's nonewprivs image
// does. The conformance images install it setuid root: with
// no_new_privs the kernel ignores the setuid bit and it prints the caller's
// uid, without it prints 0.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
