package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runc "github.com/containerd/go-runc"
	"google.golang.org/protobuf/proto"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/runcfront"
)

// runcFront finds the runc front (gensee-runc, shim/runcfront) beside the
// shim once: the program the inner task service runs as its runc, which
// starts and deletes a task itself and runs the real runc for the rest.
type runcFront struct {
	once sync.Once
	path string // "" when there is no trusted front: the real runc is run
}

// binary is the front's path when it sits beside the shim and is as
// trusted as it (fsafe.OpenTrustedSibling); "" otherwise. go-runc runs it
// by that path: only root or the shim's owner may replace it there.
func (f *runcFront) binary() string {
	f.once.Do(func() {
		if fh, err := fsafe.OpenTrustedSibling(runcfront.Binary); err == nil {
			f.path = fh.Name()
			fh.Close()
		}
	})
	return f.path
}

// runcLink is the task's runc as the inner task service runs it (its
// BinaryName): a symbolic link in the bundle, to the real runc for the
// task's create, which is runc's work alone, then to the front (toFront)
// for every later call. go-runc runs it by path and the kernel follows
// the link at each exec, so the create runs runc without the front's
// start-up in between (about 2 ms of a ctr run's critical path).
const runcLink = "gensee-runc.bin"

// handRunc is the runc options the inner task service gets for the task
// in bundle: o (admitted, the operator's runc pinned) with the bundle's
// runcLink as its binary, linked to the absolute path of real (the binary
// checkSeccomp found for o), which the bundle's runcfront.RuncFile names
// for the front to run; o itself without a front.
func (s *service) handRunc(bundle string, o *runcoptions.Options, real string) (*runcoptions.Options, error) {
	front := s.front.binary()
	// The front reads the real runc from the bundle only where no one but
	// root or the shim's owner may write the directories above it; where
	// they fail that, the task gets the real runc itself.
	if front == "" || real == "" || fsafe.TrustedDirs(bundle, uint32(os.Geteuid())) != nil {
		return o, nil
	}
	real, err := filepath.Abs(real)
	if err != nil {
		return nil, fmt.Errorf("find runc binary %q: %w", real, err)
	}
	// Not fsynced, as containerd writes the bundle: it ends with the machine.
	if err := record.ReplaceFile(filepath.Join(bundle, runcfront.RuncFile), []byte(real+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the runc front's runc: %w", err)
	}
	link := filepath.Join(bundle, runcLink)
	if err := relink(link, real); err != nil {
		return nil, fmt.Errorf("link the task's runc: %w", err)
	}
	h := proto.Clone(o).(*runcoptions.Options)
	h.BinaryName = link
	return h, nil
}

// toFront links the runc of the task in bundle to the front, once runc
// has created the task, when handRunc handed the link (handed: its
// options): its start, its delete and every later call go through the
// front, which runs the real runc for what it does not answer itself. If
// the link cannot be changed, the real runc stays, and answers those
// calls as well.
func (s *service) toFront(bundle string, handed *runcoptions.Options) error {
	link := filepath.Join(bundle, runcLink)
	if handed == nil || handed.BinaryName != link {
		return nil // handRunc handed the real runc itself
	}
	return relink(link, s.front.binary())
}

// relink points the symbolic link at link to target, atomically.
func relink(link, target string) error {
	tmp := link + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// frontMonitor is go-runc's process monitor in the shim (runc.Monitor):
// next (the reaper's, which the inner task service installs), except that
// a call to a task's runc link while it points to the front is answered
// here, by the front's own code (runcfront.Serve), when the front would
// answer it itself: a task's start and its delete. Each run of the front
// is an exec and a Go start-up, about 2.5 ms of a trivial task's critical
// path on the 2-vCPU VMs, twice per task; the start is the one that lets
// the container's process run. Every other call, and one the front leaves
// to the real runc, runs the link as before, unchanged.
//
// go-runc bounds a run by its call's context (exec.CommandContext kills
// it), which an exec.Cmd does not give back: a start is answered here
// only inside the shim's Start, which names its context first (starting),
// so that a Start its caller gives up on gives up its wait for the init
// too, as a killed front would; any other start runs the link.
type frontMonitor struct {
	next  runc.ProcessMonitor
	front func() string // the front's path; "" when there is none
	// served holds the exit channels of the calls answered here, for Wait.
	served sync.Map
	// starts maps a container id to the context of the Start under way
	// for it (starting).
	starts sync.Map
}

// starting names ctx as the context of the start of container id until
// the returned func is called.
func (m *frontMonitor) starting(id string, ctx context.Context) (done func()) {
	if m == nil {
		return func() {}
	}
	m.starts.Store(id, ctx)
	return func() { m.starts.CompareAndDelete(id, ctx) }
}

func (m *frontMonitor) Start(c *exec.Cmd) (chan runc.Exit, error) {
	if ec, ok := m.serve(c); ok {
		return ec, nil
	}
	return m.next.Start(c)
}

func (m *frontMonitor) StartLocked(c *exec.Cmd) (chan runc.Exit, error) {
	if ec, ok := m.serve(c); ok {
		return ec, nil
	}
	return m.next.StartLocked(c)
}

func (m *frontMonitor) Wait(c *exec.Cmd, ec chan runc.Exit) (int, error) {
	if _, ok := m.served.LoadAndDelete(ec); ok {
		return (<-ec).Status, nil
	}
	return m.next.Wait(c, ec)
}

// serve answers c in the shim when it runs a bundle's runcLink that
// points to the front and the front answers the call itself; ok is false,
// with nothing done, otherwise. Its exit, 0 or 1 as the front's would be,
// is on the channel returned.
func (m *frontMonitor) serve(c *exec.Cmd) (ec chan runc.Exit, ok bool) {
	front := m.front()
	if front == "" || filepath.Base(c.Path) != runcLink || len(c.Args) < 2 {
		return nil, false
	}
	if target, err := os.Readlink(c.Path); err != nil || target != front {
		return nil, false // still the real runc (the create), or not ours
	}
	ctx := context.Background()
	switch cmd, id := runcfront.Target(c.Args[1:]); cmd {
	case "":
		return nil, false
	case "start":
		v, named := m.starts.Load(id)
		if !named {
			return nil, false
		}
		ctx = v.(context.Context)
	}
	if ctx.Err() != nil {
		return nil, false // exec.Cmd's Start refuses it, as for a run
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	stderr := c.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	handled, err := runcfront.Serve(ctx, c.Args[1:], env, stderr)
	if !handled {
		return nil, false
	}
	status := 0
	if err != nil {
		status = 1
	}
	ec = make(chan runc.Exit, 1)
	ec <- runc.Exit{Timestamp: time.Now(), Status: status}
	m.served.Store(ec, struct{}{})
	return ec, true
}
