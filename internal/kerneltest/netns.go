package kerneltest

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Netns is a named network namespace the test created (loopback up).
type Netns struct {
	Name string // under /run/netns
	Path string
	FD   int // open O_RDONLY|O_CLOEXEC until cleanup
}

// NewNetns creates a fresh network namespace, deleted at cleanup.
func NewNetns(t testing.TB) *Netns { return NewNetnsIn(t, "") }

// NewNetnsIn creates the namespace from a process in cgroup directory cgDir
// (if set), the way runc creates a container's: the namespace's kernel
// control sockets (TCP resets, ICMP errors) then belong to that cgroup.
func NewNetnsIn(t testing.TB, cgDir string) *Netns {
	t.Helper()
	n := &Netns{Name: "gensee-t-" + RandHex(4)}
	n.Path = "/run/netns/" + n.Name
	cmd := exec.Command("ip", "netns", "add", n.Name)
	if cgDir != "" {
		if err := IntoCgroup(t, cmd, cgDir); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", n.Name, err, out)
	}
	t.Cleanup(func() {
		if n.FD > 0 {
			unix.Close(n.FD)
		}
		if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
			t.Errorf("cleanup: ip netns del %s: %v %s", n.Name, err, out)
		}
	})
	fd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", n.Path, err)
	}
	n.FD = fd
	Run(t, "ip", "-n", n.Name, "link", "set", "lo", "up")
	return n
}

// Nft runs the nft CLI inside the namespace, as the host would (nsenter
// keeps our mount namespace, so nft can resolve cgroup paths; `ip netns
// exec` remounts /sys).
func (n *Netns) Nft(t testing.TB, args ...string) string {
	t.Helper()
	return Run(t, "nsenter", append([]string{"--net=" + n.Path, "nft"}, args...)...)
}

// Do runs fn on an OS thread switched into the namespace; sockets fn opens
// stay in it for their lifetime.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.FD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime kills it on exit.
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// EchoTCP listens on addr inside the namespace and echoes what each
// connection sends, for up to 5 seconds a connection, until cleanup. Its
// sockets belong to the test process's cgroup, outside every test cgroup,
// so a table scoped to one leaves the server alone.
func (n *Netns) EchoTCP(t testing.TB, addr string) {
	t.Helper()
	var l net.Listener
	if err := n.Do(func() (err error) { l, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatalf("listen tcp %s in %s: %v", addr, n.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
}
