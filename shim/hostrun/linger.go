package hostrun

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/shim/netpolicy"
)

// handOff gives the sockets that deleted tables during the run (the run's
// own at its exit, an orphan's at its start) to a gensee-sandbox process
// that only exits: the release of such a socket waits until the kernel
// has freed the table, 5-25 ms after its deletion (netpolicy's
// linger.go), and a process cannot exit while one of its threads waits.
// The table is gone either way; the caller gets the run's status without
// waiting for the kernel's memory. The holder gets those sockets and
// /dev/null as its stdio (never the caller's pipes, which a caller may
// read to EOF), in a session of its own, and nobody waits for it. If it
// cannot be started, the sockets are closed in the background.
func (req Request) handOff() {
	held := netpolicy.Held()
	if len(held) == 0 {
		return
	}
	if err := startHolder(req.Self, held); err != nil {
		go closeAll(held) // this process's exit waits for them, as it would have
		return
	}
	closeAll(held) // the holder has its own: these release nothing
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func startHolder(self string, held []*os.File) error {
	self, done, err := sandboxPath(self)
	if err != nil {
		return err
	}
	defer done()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	// Whatever fd gensee inherited without close-on-exec would pass to
	// the holder too (os.StartProcess passes only what it is given).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return err
	}
	p, err := os.StartProcess(self, []string{"gensee", inner.LingerArg}, &os.ProcAttr{
		Env: []string{}, Files: append([]*os.File{null, null, null}, held...),
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return err
	}
	return p.Release()
}
