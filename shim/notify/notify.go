package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/spec"
)

// Timeout bounds one notify command: past it its process group is killed.
const Timeout = 10 * time.Second

// MaxInFlight bounds the notify commands one process runs at a time.
const MaxInFlight = 4

// MaxQueued bounds the notifications waiting for a slot, process-wide.
const MaxQueued = 64

// maxStderr bounds the command's stderr kept for the log line.
const maxStderr = 4 << 10

// queue holds the notifications of this process waiting for one of the
// MaxInFlight slots: a burst (a workload that makes findings fire on
// purpose) waits instead of pushing a later, graver finding out.
// Findings of the priority signatures go first, and when the queue is
// full one evicts the newest routine one waiting.
var queue struct {
	sync.Mutex
	hi, lo   []job // priority signatures, the rest; each oldest first
	inflight int
}

// running counts the notifications queued or in flight, for Wait.
var running sync.WaitGroup

// priority are the signatures no burst of the others may crowd out: the
// table itself changed, a staged product changed.
var priority = map[string]bool{"table_tampered": true, "product_mismatch": true}

type job struct {
	n  *Notifier
	f  spec.Finding
	lg *log.Entry
}

// enqueue queues j and starts what the slots allow; false when the queue
// was full and j could not evict a routine notification.
func enqueue(j job) bool {
	queue.Lock()
	defer queue.Unlock()
	pri := priority[j.f.Signature]
	if len(queue.hi)+len(queue.lo) >= MaxQueued {
		if !pri || len(queue.lo) == 0 {
			return false
		}
		ev := queue.lo[len(queue.lo)-1]
		queue.lo = queue.lo[:len(queue.lo)-1]
		ev.lg.Warn("notify command not run: the queue is full and a graver finding took its place; the finding stays in the attention record and events log")
		running.Done()
	}
	running.Add(1)
	if pri {
		queue.hi = append(queue.hi, j)
	} else {
		queue.lo = append(queue.lo, j)
	}
	dispatchLocked()
	return true
}

// dispatchLocked starts queued notifications while slots are free.
// Called with the queue locked.
func dispatchLocked() {
	for queue.inflight < MaxInFlight {
		var j job
		switch {
		case len(queue.hi) > 0:
			j, queue.hi = queue.hi[0], queue.hi[1:]
		case len(queue.lo) > 0:
			j, queue.lo = queue.lo[0], queue.lo[1:]
		default:
			return
		}
		queue.inflight++
		go func() {
			defer running.Done()
			if err := j.n.run(j.f); err != nil {
				j.lg.WithError(err).Warn("notify command failed (guidance only: nothing was decided by it)")
			}
			queue.Lock()
			queue.inflight--
			dispatchLocked()
			queue.Unlock()
		}()
	}
}

// Payload is what the command reads on stdin: one JSON object, then EOF.
type Payload struct {
	OperationID string `json:"operation_id"`
	// ContainerID is the container's id (shim, hooks); a host run has
	// none and names its operation id here.
	ContainerID string `json:"container_id"`
	// Runtime is the front door, as the admission record's facts name it:
	// io.containerd.gensee.v2, oci-hooks or host.
	Runtime   string       `json:"runtime"`
	Signature string       `json:"signature"`
	Detail    string       `json:"detail"`
	At        time.Time    `json:"at"`
	Evidence  []spec.Event `json:"evidence"`
}

// Starter starts cmd and returns a wait for its end. The shim is a
// subreaper whose reaper reaps every child (exec.Cmd.Wait would race it),
// so it passes one going through that reaper; the other doors use
// cmd.Start and cmd.Wait.
type Starter func(cmd *exec.Cmd) (wait func() error, err error)

// Config is one operation's notifier.
type Config struct {
	// Argv is the operator config's notify_command; empty: no notifier.
	Argv        []string
	OperationID string
	ContainerID string
	Runtime     string
	Logger      *log.Entry
	// Start defaults to cmd.Start and cmd.Wait.
	Start Starter
	// Timeout defaults to Timeout.
	Timeout time.Duration
}

// Notifier runs the notify command of one operation.
type Notifier struct {
	cfg Config
}

// New returns the operation's notifier. Its Finding is monitor.Config's
// Notify.
func New(c Config) *Notifier {
	if c.Start == nil {
		c.Start = startWait
	}
	if c.Timeout <= 0 {
		c.Timeout = Timeout
	}
	if c.Logger == nil {
		c.Logger = log.L
	}
	return &Notifier{cfg: c}
}

func startWait(cmd *exec.Cmd) (func() error, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd.Wait, nil
}

// Finding runs the notify command for f in the background; it returns at
// once. Without a notify command it does nothing. With MaxInFlight
// commands running it queues f (table_tampered and product_mismatch
// first); with MaxQueued waiting it drops f's notification and logs it
// (the attention record and the events log still hold the finding).
func (n *Notifier) Finding(f spec.Finding) {
	if n == nil || len(n.cfg.Argv) == 0 {
		return
	}
	lg := n.cfg.Logger.WithField("signature", f.Signature)
	if !filepath.IsAbs(n.cfg.Argv[0]) {
		lg.WithField("notify_command", n.cfg.Argv[0]).Warn("notify command not run: notify_command's first word must be an absolute path")
		return
	}
	if !enqueue(job{n: n, f: f, lg: lg}) {
		lg.WithField("queued", MaxQueued).Warn("notify command not run: too many findings waiting; the finding stays in the attention record and events log")
	}
}

// Wait waits for the notifications of this process still queued or in
// flight, at most MaxWait: each command ends by its own deadline, but a
// full queue could take minutes. A door whose process ends with its
// operation (a host run, a hook's monitor, gensee manifest verify) calls
// it last, so that its notifications are neither cut short nor left
// unbounded.
func Wait() {
	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(MaxWait):
	}
}

// MaxWait bounds Wait.
const MaxWait = 30 * time.Second

// run runs the command once, in its own process group, killed whole at the
// deadline.
func (n *Notifier) run(f spec.Finding) error {
	p := Payload{OperationID: n.cfg.OperationID, ContainerID: n.cfg.ContainerID, Runtime: n.cfg.Runtime,
		Signature: f.Signature, Detail: f.Detail, At: f.At.UTC(), Evidence: f.Evidence}
	if p.Evidence == nil {
		p.Evidence = []spec.Event{}
	}
	stdin, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(n.cfg.Argv[0], n.cfg.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(append(stdin, '\n'))
	cmd.Stderr = &limited{b: &stderr, max: maxStderr}
	cmd.Env = append(os.Environ(), "GENSEE_OPERATION_ID="+p.OperationID, "GENSEE_CONTAINER_ID="+p.ContainerID,
		"GENSEE_RUNTIME="+p.Runtime, "GENSEE_SIGNATURE="+p.Signature, "GENSEE_DETAIL="+p.Detail)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that leaves stderr open past the group's end does not hold
	// Wait.
	cmd.WaitDelay = time.Second
	wait, err := n.cfg.Start(cmd)
	if err != nil {
		return fmt.Errorf("start %s: %w", n.cfg.Argv[0], err)
	}
	timer := time.AfterFunc(n.cfg.Timeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = wait()
	if !timer.Stop() {
		return fmt.Errorf("%s: killed (process group) at its %s deadline", n.cfg.Argv[0], n.cfg.Timeout)
	}
	if err != nil {
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("%s: %w", n.cfg.Argv[0], err)
	}
	return nil
}

// limited keeps the first max bytes written and drops the rest.
type limited struct {
	b   *bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// ExitStatus turns a reaper's exit status into a Starter's wait error
// (cmd.Wait's own status is lost to the reaper).
func ExitStatus(status int, err error) error {
	if err == nil && status != 0 {
		return fmt.Errorf("exit status %d", status)
	}
	return err
}
