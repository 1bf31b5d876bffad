package service

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/monitor"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// opState is where an operation is in its life. Transitions:
//
//	created -> started -> exited -> deleted
//	created -> deleted            (never started: never finalized)
type opState int

const (
	opCreated opState = iota
	opStarted
	opExited
	opDeleted
)

func (s opState) String() string {
	return [...]string{"created", "started", "exited", "deleted"}[s]
}

// next reports whether the lifecycle allows moving from s to t.
func (s opState) next(t opState) bool {
	switch s {
	case opCreated:
		return t == opStarted || t == opDeleted
	case opStarted:
		return t == opExited || t == opDeleted
	case opExited:
		return t == opDeleted
	}
	return false
}

// operation is one admitted container: its records, its table and the
// handles that keep them reachable.
type operation struct {
	id          string
	namespace   string
	containerID string
	bundle      string
	cfg         config.Config
	store       record.Store
	contract    spec.Contract
	admission   *admissionRecord
	ctx         context.Context  // the shim's namespaced context, for publishing
	pub         events.Publisher // where boundary events go besides events.jsonl
	mon         *monitor.Monitor // set by bind; nil before
	wantNetns   nsID             // a joined netns as checked at admission; zero otherwise
	userns      bool             // the container has a user namespace
	wantUserns  nsID             // a joined user namespace as checked at admission; zero otherwise
	uidMappings []specs.LinuxIDMapping
	initPID     int // set by bind

	mu          sync.Mutex
	state       opState  // guarded by mu
	netns       *os.File // the container's netns; held so the table stays reachable; guarded by mu
	removed     string   // how the table went, once it did; guarded by mu
	plan        *netpolicy.Plan
	deadline    *time.Timer   // guarded by mu
	deadlineHit bool          // guarded by mu
	done        chan struct{} // closed when the exit path finished
	held        *hold
	diff        diffSource  // where the gate reads the task's changes
	gateHelper  *gateHelper // spawned and used (or abandoned) by the exit path
	mounts      []string    // mount destinations of config.json (runc stubs them in the upperdir)
	startedAt   time.Time   // guarded by mu
	// override replaces the init's exit status when the gate failed and the
	// operator mapped that to a status; written before done is closed.
	override *uint32
}

func (op *operation) logger(ctx context.Context) *log.Entry {
	return log.G(ctx).WithField("container_id", op.containerID).WithField("operation_id", op.id)
}

// transition moves the operation to t if the lifecycle allows it.
func (op *operation) transition(t opState) bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	if !op.state.next(t) {
		return false
	}
	op.state = t
	return true
}

func (op *operation) current() opState {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.state
}
