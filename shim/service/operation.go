package service

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// opState is where an operation is in its life. Transitions:
//
//	created -> starting -> running -> exited -> deleting -> deleted
//	starting -> created   (the inner Start failed: nothing ran)
//	created -> deleting   (never started: never finalized)
//	deleting -> created|exited (the inner Delete failed: as before it)
//
// Every move goes through the transition table (lifecycle.move, and
// claimDelete for Delete's claim); nothing sets the state directly.
type opState int

const (
	opCreated opState = iota
	opStarting
	opRunning
	opExited
	opDeleting
	opDeleted
)

func (s opState) String() string {
	return [...]string{"created", "starting", "running", "exited", "deleting", "deleted"}[s]
}

// next reports whether the lifecycle allows moving from s to t.
func (s opState) next(t opState) bool {
	switch s {
	case opCreated:
		return t == opStarting || t == opDeleting
	case opStarting:
		return t == opRunning || t == opCreated
	case opRunning:
		return t == opExited
	case opExited:
		return t == opDeleting
	case opDeleting:
		return t == opDeleted || t == opCreated || t == opExited
	}
	return false
}

// lifecycle holds an operation's state under a lock of its own.
type lifecycle struct {
	mu    sync.Mutex
	state opState // guarded by mu
	// ran: the init was started and the exit watcher launched, so done
	// will close; guarded by mu.
	ran bool
	// settle is closed when the state leaves starting; guarded by mu.
	settle chan struct{}
}

// move moves to t when the lifecycle allows it from the current state, or
// says why not as containerd's shims do ("cannot start a task in running
// state"), wrapping ErrFailedPrecondition for the caller's status code.
func (l *lifecycle) move(verb string, t opState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moveLocked(verb, t)
}

// moveLocked is move with l.mu held.
func (l *lifecycle) moveLocked(verb string, t opState) error {
	if !l.state.next(t) {
		return fmt.Errorf("cannot %s a task in %s state: %w", verb, l.state, errdefs.ErrFailedPrecondition)
	}
	if l.state == opStarting {
		close(l.settle)
	}
	if t == opStarting {
		l.settle = make(chan struct{})
	}
	if t == opRunning {
		l.ran = true
	}
	l.state = t
	return nil
}

func (l *lifecycle) current() opState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// claimDelete moves to deleting in one step and says from where: from
// created (the init never ran), or from exited once done is closed (the
// exit pipeline released). wait is true when the caller must wait for done
// (or for a Start in flight to settle) and claim again; any other state is
// refused.
func (l *lifecycle) claimDelete(done <-chan struct{}) (from opState, wait bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from = l.state
	switch from {
	case opExited:
		select {
		case <-done:
		default:
			return from, true, nil
		}
	case opStarting, opRunning:
		return from, true, nil
	}
	return from, false, l.moveLocked("delete", opDeleting)
}

// settled waits while a Start is in flight and reports whether the init
// ran (its exit pipeline will release done), or ctx's error.
func (l *lifecycle) settled(ctx context.Context) (ran bool, err error) {
	l.mu.Lock()
	st, ch := l.state, l.settle
	l.mu.Unlock()
	if st == opStarting {
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ran, nil
}

// operation is one admitted container: who it is, what governs it, its
// records, and the two parts that outlive Create — the network boundary
// (netns, table, sensors; its own lock) and the exit pipeline that
// finalizes it.
type operation struct {
	// capExecs counts the execs whose CAP_NET_RAW was removed.
	capExecs atomic.Int64

	id          string
	namespace   string
	containerID string
	bundle      string
	cfg         config.Config
	store       record.Store
	contract    spec.Contract
	admission   *spec.Admission
	ctx         context.Context  // the shim's namespaced context, for publishing
	pub         events.Publisher // where boundary events go besides events.jsonl
	wantNetns   nsID             // a joined netns as checked at admission; zero otherwise
	netnsAlone  bool             // the joined netns was admitted as one no process is in (checkJoinPaths): bind checks the init is alone there
	userns      bool             // the container has a user namespace
	wantUserns  nsID             // a joined user namespace as checked at admission; zero otherwise
	uidMappings []specs.LinuxIDMapping
	initPID     int            // set by bind
	diff        diffSource     // where the gate reads the task's changes
	baseline    *gate.Baseline // the upperdir before the init ran (takeBaseline); set by bind, read by the gate
	baselineDur time.Duration  // what takeBaseline took, for Create's log
	admitTook   time.Duration  // Create's receipt to runc started; set before bind, recorded by it (spec.AdmissionTiming)
	mounts      []string       // mount destinations of config.json (runc stubs them in the upperdir)
	ownRootfs   bool           // the shim mounted the task's snapshot at the bundle's rootfs (admit): the release or Delete unmounts it
	ownPidns    bool           // runc makes the container its own pid namespace (privatePidns)
	specHooks   bool           // the spec has OCI hooks: runc's delete runs the poststop ones, on the rootfs
	// exitPath is set by the exit path (watchExit) before it runs, and
	// read by the release it calls, in the same goroutine: that release
	// unmounts the rootfs (unmountReleased); a never-started task's does
	// not.
	exitPath bool
	// unmounting is closed once the unmount unmountReleased started is
	// done; nil when it started none. It is set before done is closed,
	// and unmountedOK (whether that unmount succeeded) before unmounting
	// is: Delete reads it after both.
	unmounting  chan struct{}
	unmountedOK bool
	// execPolicy is what Create admitted that an exec is held to (the
	// oom_score_adj floor, the init's LSM labels and rlimits).
	execPolicy specpolicy.Operator

	// recorded waits for the bound admission record (recordBound); nil
	// before bind.
	recorded func() error

	life lifecycle
	net  *engine.Boundary // never nil; empty until bind
	exit *engine.Finish
	// warm is the gate helper started while the task runs (nil: none,
	// the task has no diff to gate); set before the operation is put.
	warm *warmGate
	// startedAt is written by Start before the exit path can run and read
	// by it only.
	startedAt time.Time
	deadline  engine.Deadline
	held      *hold         // the armed TaskExit; set by Start before the exit path runs
	done      chan struct{} // closed by the exit pipeline's release
	// innerExited is closed once the inner Wait answered for the init
	// (watchExit): the inner service has handled its exit.
	innerExited chan struct{}
	// override replaces the init's exit status when the gate failed and the
	// operator mapped that to a status; written before done is closed.
	override *uint32
}

// waitRecorded waits for the admission record bind wrote.
func (op *operation) waitRecorded() error {
	if op.recorded == nil {
		return nil
	}
	return op.recorded()
}

func (op *operation) logger(ctx context.Context) *log.Entry {
	return log.G(ctx).WithField("container_id", op.containerID).WithField("operation_id", op.id)
}
