package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/containerd/containerd/v2/pkg/sys/reaper"
	runc "github.com/containerd/go-runc"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/gate"
)

// GateHelperArg, as argv[1] of the shim binary, runs one gate and exits
// (gate.HelperMain): the fallback when the dedicated helper binary is not
// installed next to the shim. The shim runs the gate in a helper process so
// that a panic, a hang or a memory blow-up in the gate costs a failed
// verdict, never the shim (which serves every container of a pod) or a hung
// Delete.
const GateHelperArg = "gensee-gate-helper"

// GateHelperBinary is the dedicated helper (cmd/gensee-gate-helper), looked
// up in the directory of the shim's own binary. It links the gate alone:
// about a fifth of the shim, and it starts in half the time.
const GateHelperBinary = "gensee-gate-helper"

const maxGateResultBytes = 64 << 20

// gateHelper is a gate helper process: the warm one started while the
// task runs (warmGate), or one started when the init exits, whose exec and
// start-up overlap the drain. None stays resident while a task runs past
// warmKeep (a sleeping container costs the shim alone). It waits on stdin
// for its input; closing stdin without input makes it exit.
type gateHelper struct {
	cmd  *exec.Cmd
	ec   chan runc.Exit
	proc cgroup.Proc // the helper beyond pid reuse (Start 0 if it was gone at once)
	// exited is closed once the reaper has reported the helper's exit,
	// with status and werr set: a goroutine waits on ec from the spawn on,
	// so the reaper, which hands every exit in the shim to every
	// subscriber, never waits on this one.
	exited chan struct{}
	status int
	werr   error
	stdin  io.WriteCloser
	out    chan []byte // stdout, read to EOF (at most maxGateResultBytes+1 bytes)
	stderr bytes.Buffer
}

// helperCommand is the dedicated helper binary when it sits next to the
// shim's and is as trusted as it (fsafe.OpenTrustedSibling: a regular
// file of the same owner, writable by nobody else, in directories only
// root or that owner may write), started from the file that was opened
// and checked (fsafe.ExecLink), never by its path again; or else the shim
// binary itself as the helper. release closes what the command holds; the
// caller calls it once the command has started (or will not).
func helperCommand() (cmd *exec.Cmd, release func(), err error) {
	if f, err := fsafe.OpenTrustedSibling(GateHelperBinary); err == nil {
		link, remove := fsafe.ExecLink(f, GateHelperBinary)
		cmd := exec.Command(f.Name())
		cmd.Path = link
		return cmd, func() { remove(); f.Close() }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find shim binary: %w", err)
	}
	return exec.Command(self, GateHelperArg), func() {}, nil
}

// gateHelperCommand makes the helper's command; tests replace it with a
// helper that hangs.
var gateHelperCommand = helperCommand

// spawnGateHelper starts a waiting gate helper through the shim's reaper;
// warm tells it it will be put in the idle class while it waits (warmGate).
func spawnGateHelper(warm bool) (*gateHelper, error) {
	cmd, release, err := gateHelperCommand()
	if err != nil {
		return nil, err
	}
	defer release()
	h := &gateHelper{cmd: cmd, out: make(chan []byte, 1)}
	h.cmd.Env = []string{"GOMAXPROCS=2", "GOGC=40"}
	if warm {
		h.cmd.Env = append(h.cmd.Env, gate.HelperWarmEnv+"=1")
	}
	h.cmd.Stderr = &limitedBuffer{&h.stderr, 64 << 10}
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("gate helper stdin: %w", err)
	}
	// stdout is a pipe of our own, not exec's: its read end is never
	// closed by the Wait that reaps the helper, so the result can be read
	// to EOF without waiting for the reaper.
	rd, wr, err := os.Pipe()
	if err != nil {
		h.stdin.Close()
		return nil, fmt.Errorf("gate helper stdout: %w", err)
	}
	h.cmd.Stdout = wr
	h.ec, err = reaper.Default.Start(h.cmd)
	wr.Close()
	if err != nil {
		rd.Close()
		h.stdin.Close()
		return nil, fmt.Errorf("start gate helper: %w", err)
	}
	h.proc.PID = h.cmd.Process.Pid
	if st, err := cgroup.ReadStat(h.proc.PID); err == nil {
		h.proc.Start = st.Start
	}
	h.exited = make(chan struct{})
	go func() {
		defer close(h.exited)
		h.status, h.werr = reaper.Default.Wait(h.cmd, h.ec)
	}()
	go func() {
		defer rd.Close()
		b, _ := io.ReadAll(io.LimitReader(rd, maxGateResultBytes+1))
		h.out <- b
	}()
	return h, nil
}

// run hands the helper its input (a gate.Input, encoded) and waits for
// the result, bounded by timeout from now.
func (h *gateHelper) run(input []byte, timeout time.Duration) (*gate.Result, error) {
	// The pipe may be full only if the helper is not reading; the timeout
	// below then kills it, which unblocks the write.
	go func() { h.stdin.Write(input); h.stdin.Close() }()
	type exit struct {
		status int
		err    error
	}
	exited := make(chan exit, 1)
	go func() {
		status, err := h.wait(timeout)
		exited <- exit{status, err}
	}()
	// The helper writes its result last, once, after the staged copies
	// are durable, and exits 0 (gate.HelperMain): a whole result read to
	// EOF is its answer, taken without waiting for the reaper to report
	// the exit (which it still collects). Anything else waits for the
	// exit status, which says what went wrong.
	var out []byte
	select {
	case out = <-h.out:
		if res, err := decodeGateResult(out); err == nil {
			return res, nil
		}
	case x := <-exited:
		exited <- x
	}
	x := <-exited
	if x.err != nil {
		return nil, fmt.Errorf("gate helper: %w", x.err)
	}
	if x.status != 0 {
		return nil, fmt.Errorf("gate helper exited %d: %s", x.status, bytes.TrimSpace(h.stderr.Bytes()))
	}
	if out == nil {
		out = <-h.out // EOF came with the exit
	}
	return decodeGateResult(out)
}

// decodeGateResult decodes a helper's whole stdout (read to at most one
// byte past the bound).
func decodeGateResult(out []byte) (*gate.Result, error) {
	if len(out) > maxGateResultBytes {
		return nil, fmt.Errorf("decode gate result: more than %d bytes", maxGateResultBytes)
	}
	var res gate.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("decode gate result: %w", err)
	}
	return &res, nil
}

// wait waits for the helper's exit, at most timeout; past it the helper
// is killed (and its exit still collected).
func (h *gateHelper) wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-h.exited:
		return h.status, h.werr
	case <-t.C:
		unix.Kill(h.proc.PID, unix.SIGKILL)
		// The gate's context ended at the same time: the exit path names
		// the limit (engine.Finish.runGate).
		return 0, fmt.Errorf("killed at the gate's limit: pid %d, %v after its input: %w", h.proc.PID, timeout, context.DeadlineExceeded)
	}
}

// gone reports whether the helper has exited.
func (h *gateHelper) gone() bool {
	select {
	case <-h.exited:
		return true
	default:
		return false
	}
}

// abandon makes an unused helper exit and reaps it.
func (h *gateHelper) abandon() {
	h.stdin.Close()
	h.wait(5 * time.Second)
}

// runGate runs the gate in helper h (spawned now if nil) on input (a
// gate.Input, encoded), bounded by timeout.
func runGate(h *gateHelper, input []byte, timeout time.Duration) (*gate.Result, error) {
	if h == nil {
		var err error
		if h, err = spawnGateHelper(false); err != nil {
			return nil, err
		}
	}
	return h.run(input, timeout)
}

// runHelper runs argv with env and stdin, bounded by timeout, and returns
// its stdout (at most maxOut bytes). Children are started and waited
// through the shim's reaper: the shim is a subreaper and a bare
// exec.Cmd.Wait would race the reaper for the exit status.
func runHelper(argv, env []string, stdin []byte, maxOut int, timeout time.Duration) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &limitedBuffer{&stdout, maxOut}, &limitedBuffer{&stderr, 64 << 10}
	cmd.Env = env
	ec, err := reaper.Default.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	status, err := reaper.Default.WaitTimeout(cmd, ec, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w (limit %s)", err, timeout)
	}
	if status != 0 {
		return nil, fmt.Errorf("%s exited %d: %s", argv[0], status, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// limitedBuffer drops output past max instead of growing without bound.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}
