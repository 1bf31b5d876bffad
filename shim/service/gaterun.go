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

	"github.com/gensee/gensee/shim/gate"
)

// GateHelperArg, as argv[1] of the shim binary, runs one gate and exits.
// The shim runs the gate in such a helper process so that a panic, a hang or
// a memory blow-up in the gate costs a failed verdict, never the shim (which
// serves every container of a pod) or a hung Delete.
const GateHelperArg = "gensee-gate-helper"

const maxGateResultBytes = 64 << 20

// GateHelperMain reads a gate.Input as JSON on stdin, runs the gate and
// writes the gate.Result as JSON on stdout. Exit 0: a result was written
// (whatever its verdict); 1: the gate could not run (message on stderr).
func GateHelperMain(stdin io.Reader, stdout, stderr io.Writer) int {
	var in gate.Input
	if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&in); err != nil {
		fmt.Fprintln(stderr, "gate helper: decode input:", err)
		return 1
	}
	res, err := gate.Run(context.Background(), in)
	if err != nil {
		fmt.Fprintln(stderr, "gate helper:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "gate helper: encode result:", err)
		return 1
	}
	return 0
}

// runGate runs the gate in a helper process bounded by timeout.
func runGate(ctx context.Context, in gate.Input, timeout time.Duration) (*gate.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find shim binary: %w", err)
	}
	input, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode gate input: %w", err)
	}
	out, err := runHelper([]string{self, GateHelperArg}, []string{"GOMAXPROCS=2", "GOGC=40"}, input, maxGateResultBytes, timeout)
	if err != nil {
		return nil, fmt.Errorf("gate helper: %w", err)
	}
	var res gate.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("decode gate result: %w", err)
	}
	return &res, nil
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

// runBounded runs the operator's notify command; failures are logged.
func runBounded(op *operation, argv, env []string, timeout time.Duration) {
	if _, err := runHelper(argv, env, nil, 64<<10, timeout); err != nil {
		op.logger(context.Background()).WithError(err).Warn("notify command")
	}
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
