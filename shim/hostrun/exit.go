package hostrun

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/drain"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// hostExit is what a host run learned that only a host run learns.
type hostExit struct {
	status    uint32
	started   time.Time
	deadline  bool
	writables []string
	sandbox   *spec.HostSandbox
	stdio     *stdio
	lingering int // processes the wrapper killed after the command exited
}

// exit is the exit path (engine.Finish): drain, gate on the upper dir,
// the network's end, manifest; then the cgroup removed and the records
// marked cleaned.
func (r *run) exit(ctx context.Context, h *held, hx hostExit) (*Result, error) {
	dir, err := r.store.OperationDir(r.id)
	if err != nil {
		return nil, err
	}
	released := func() error { return nil } // the reserve's removal (Settle)
	handed := make(chan struct{})           // the table's socket handed off (Settle)
	p := &engine.Finish{
		Gate:      runGate{r: r, dir: dir},
		Drain:     runDrain{h: h, hx: hx},
		Network:   h.net,
		Store:     engine.RecordStore{Store: r.store, ID: r.id, Log: r.log},
		Release:   runRelease{r: r, h: h, dir: dir, reserve: &released},
		Manifest:  func(x engine.Facts) *spec.Manifest { return r.manifest(x, hx) },
		GateLimit: r.req.Config.GateTimeout.Duration,
		// The command may have filled the state dir's file system through
		// the upper dir (the gate's staging then failed, and says so): the
		// reserve's blocks are what the last events and the manifest are
		// written into, given back once the gate is done or left.
		// The table is gone by then (the network's end): the socket
		// that deleted it goes to its holder beside the manifest's
		// write (handOff).
		Settle: func() {
			released = releaseSpace(dir)
			go func() { r.req.handOff(); close(handed) }()
		},
		Log: r.log,
	}
	st := hx.status
	m, err := p.Run(ctx, engine.Facts{Status: &st, Started: hx.started, Exit: engine.Exit{Deadline: hx.deadline}})
	<-handed // Settle always runs
	r.phases.mark("exit_path")
	r.log.WithFields(r.phases.fields).Debug("host run phases")
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, record.ManifestFile))
	if err != nil {
		return nil, err
	}
	return &Result{OperationID: r.id, Manifest: m, ManifestRaw: raw, Status: int(hx.status)}, nil
}

// runDrain drains the run's cgroup and every escaped process, then waits
// for the relayed pipes: every writer is gone with the cgroup, so what the
// command wrote reaches the caller before the verdict line.
type runDrain struct {
	h  *held
	hx hostExit
}

func (d runDrain) Drain(ctx context.Context) drain.Result {
	k := drain.All(ctx, d.h.cg.Path, d.h.net.DrainSteps())
	// Processes the command left were killed when it exited (pid 1's
	// kill); the drain kills whatever else is in the cgroup.
	k.Drained += d.hx.lingering
	d.hx.stdio.wait(2 * time.Second)
	return k
}

// runGate gates the overlay's upper dir against the workspace, in this
// process (engine.InProcess).
type runGate struct {
	r   *run
	dir string
}

func (g runGate) Prepare(context.Context, time.Time) {}

func (g runGate) Run(ctx context.Context, started time.Time) engine.GateOutcome {
	return engine.InProcess{Input: func(started time.Time) (gate.Input, error) {
		c := g.r.contract
		// No Baseline: the run makes its upper dir itself (makeUpper),
		// empty, in the operation's new record directory, and nothing
		// but the command writes there: everything in it is the
		// command's.
		return gate.Input{
			// The lower layer is the directory checked and mounted,
			// through its fd: never whatever the workspace path names at
			// exit.
			UpperDir: filepath.Join(g.dir, upperDir), LowerDirs: []string{g.r.ws.FDPath()}, Workspace: "/",
			Products: c.Products, StagingDir: filepath.Join(g.dir, record.StagedDir), StartTime: started,
			FailUnclaimed: c.FailUnclaimed(),
		}, nil
	}}.Run(ctx, started)
}

// runRelease removes what the run still holds once its manifest is
// durable (the cgroup; the table went in the network's end) and marks the
// records cleaned; anything left stays marked for the next run.
type runRelease struct {
	r       *run
	h       *held
	dir     string
	reserve *func() error // waits for the reserve's removal
}

func (rl runRelease) Release(*spec.Manifest, *uint32) error {
	if err := (*rl.reserve)(); err != nil {
		rl.r.log.WithError(err).Error("release the records' reserve")
	}
	if rl.r.undo(context.Background(), rl.h) {
		return errors.New("the run's cgroup or table could not be removed; a later gensee boundary run retries")
	}
	// Cleaned only with its manifest: a record without one is kept, and
	// says so.
	if _, err := os.Stat(filepath.Join(rl.dir, record.ManifestFile)); err == nil {
		_ = rl.r.store.MarkCleaned(rl.r.id, "") // losing it only keeps the record longer
	}
	return nil
}

// forwardSignals forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the
// wrapper (which hands them to the command); Grace after the first, the
// cgroup is killed. SIGTSTP, SIGTTIN and SIGTTOU are ignored: nothing the
// command does to a terminal can stop the runner, so the deadline, the
// drain and the manifest always happen. The returned func stops
// forwarding.
func (r *run) forwardSignals(p *os.Process, h *held) func() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, inner.Forwarded...)
	signal.Ignore(unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	done := make(chan struct{})
	grace := r.req.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	cg := h.cg
	go func() {
		var kill <-chan time.Time
		for {
			select {
			case s := <-ch:
				p.Signal(s)
				r.log.WithField("signal", s.String()).Info("forwarded the signal to the command")
				if kill == nil {
					kill = time.After(grace)
				}
			case <-kill:
				cg.kill()
				r.log.Warn("the command outlived the grace after a forwarded signal; its cgroup was killed")
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// writables lists every place the command could write: the staged
// workspace (volatile: its overlay took the flag) and the private tmpfs
// the wrapper reported it mounted.
func writables(ws string, tmpfs []string, volatile bool) []string {
	staged := ws + " (staged: overlay upper dir in the operation record, read by the gate; the real workspace was the read-only lower layer"
	if volatile {
		staged += "; the overlay is volatile: the command's fsync, fdatasync and syncfs there make nothing durable (sync(2) and the kernel's writeback may still write it), and only what the gate staged is made durable"
	}
	out := []string{staged + ")"}
	for _, d := range tmpfs {
		out = append(out, d+" (private tmpfs, discarded at exit)")
	}
	return out
}
