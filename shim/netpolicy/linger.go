package netpolicy

import (
	"os"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A table's deletion leaves nf_tables objects to free after an RCU grace
// period (its destroy work), and the release of any netfilter netlink
// socket in the namespace waits for that work (nft_rcv_nl_event): 5-25 ms
// on a 2-vCPU VM. The table is gone once the kernel acked the commit; only
// its memory is not. So the socket that deleted it is not closed before
// the caller's next steps: a long-lived process closes it in the
// background; a process about to exit (a host run's parent, whose caller
// waits for its exit, which waits for every thread, that close included)
// holds it (HoldReleases) and hands it to a process of its own that
// outlives it (Held).

var held struct {
	mu    sync.Mutex
	hold  bool
	files []*os.File
}

// HoldReleases makes every later table removal keep a duplicate of the
// socket that deleted the table, for Held, instead of closing it in the
// background.
func HoldReleases() {
	held.mu.Lock()
	held.hold = true
	held.mu.Unlock()
}

// Held returns the sockets kept since HoldReleases, and keeps none: the
// caller closes them, or hands them to a process that may wait.
func Held() []*os.File {
	held.mu.Lock()
	defer held.mu.Unlock()
	f := held.files
	held.files = nil
	return f
}

// keep duplicates the socket of c for Held when releases are held. It
// reports whether it did: c's own close then releases nothing.
func keep(c *netlink.Conn) bool {
	held.mu.Lock()
	defer held.mu.Unlock()
	if !held.hold || c == nil {
		return false
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	dup := -1
	if err := rc.Control(func(fd uintptr) { dup, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 3) }); err != nil || dup < 0 {
		return false
	}
	held.files = append(held.files, os.NewFile(uintptr(dup), "nftables"))
	return true
}
