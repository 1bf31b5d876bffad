package hooks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Options are what the binary's flags and the operator config give the
// adapter.
type Options struct {
	Config     config.Config
	ConfigPath string // handed to the monitor process ("" : the default)
	// Self is this binary, re-executed as the monitor process.
	Self string
	// Grace is how long the monitor waits for poststop once the container's
	// init is gone before it finishes the operation itself (0: 30s).
	Grace time.Duration
	// ReadyTimeout bounds the monitor's start (table installed and read
	// back); 0: 20s. Keep it below the hook's timeout in the hooks JSON.
	ReadyTimeout time.Duration
}

func (o Options) grace() time.Duration {
	if o.Grace > 0 {
		return o.Grace
	}
	return 30 * time.Second
}

// gateTimeout bounds the gate at the exit path (0 in the config:
// engine.DefaultGateLimit).
func (o Options) gateTimeout() time.Duration {
	return engine.GateLimitFor(o.Config.GateTimeout.Duration)
}

// MonitorLog is the monitor process's log in the operation directory.
const MonitorLog = "hook.log"

// CreateRuntime is the createRuntime stage: admission, the operation
// record, and the monitor process, which installs and reads back the table
// before it reports ready. A *Refusal means the container must not start
// (the hook exits non-zero with its sentence on stderr); nothing of the
// operation is left but the refusal's line.
func CreateRuntime(ctx context.Context, o Options, s State) error {
	st := record.Store{Dir: o.Config.StateDir}
	if _, err := CleanOrphans(ctx, o.Config.StateDir); err != nil {
		log.G(ctx).WithError(err).Warn("remove leftovers of dead OCI hook operations")
	}
	oci, err := observe.ReadSpec(s.Bundle)
	if err != nil {
		return refused(ctx, st, s, refuse("bundle", "", "%v", err))
	}
	adm, rf := admitSpec(ctx, o.Config, s, oci, o.Self, time.Now())
	if rf != nil {
		return refused(ctx, st, s, rf)
	}
	id, err := record.NewOperationID()
	if err != nil {
		return err
	}
	adm.OperationID = id
	dir, err := st.CreateOperation(id, Namespace, s.ID)
	if err != nil {
		return fmt.Errorf("create operation record: %w", err)
	}
	if err := st.WriteJSON(id, record.AdmissionFile, adm); err != nil {
		return err
	}
	if err := startMonitor(o, id, dir, s.Pid); err != nil {
		st.Unindex(Namespace, s.ID, id)
		st.RemoveOperation(id)
		if rf, ok := spec.AsRefusal(err); ok {
			return refused(ctx, st, s, rf)
		}
		return refused(ctx, st, s, refuse(ReasonNetwork, "check that nftables with the socket cgroupv2 expression is available and the container's cgroup is on cgroup2 ("+filepath.Join(dir, MonitorLog)+" was removed with the operation)",
			"network boundary not installed, container refused: %v", err))
	}
	l := log.G(ctx).WithField("container_id", s.ID).WithField("operation_id", id).WithField("contract", adm.ContractID)
	if a := adm.Analyzer; a != nil {
		l = l.WithField("analyzer", a.Analyzer).WithField("analyzer_outcome", a.Outcome).WithField("analyzer_took_us", a.TookMicros)
	}
	l.Info("admitted; network boundary installed and read back")
	return nil
}

// monitorStatus is the monitor's one report to createRuntime.
type monitorStatus struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
	// Refusal is a bind that refused the container on its own grounds
	// (the upperdir's baseline), not the network boundary's.
	Refusal *spec.Refusal `json:"refusal,omitempty"`
}

// startMonitor starts the operation's monitor process in its own session
// (stdio on the operation's log, never the runtime's pipes, which runc
// waits on) and waits for its report.
func startMonitor(o Options, id, dir string, pid int) error {
	logf, err := os.OpenFile(filepath.Join(dir, MonitorLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := []string{"gensee-oci-hook", MonitorArg, "--operation", id, "--pid", strconv.Itoa(pid), "--grace", o.grace().String()}
	if o.ConfigPath != "" {
		args = append(args, "--config", o.ConfigPath)
	}
	cmd := &exec.Cmd{Path: o.Self, Args: args, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Stdout: logf, Stderr: logf, ExtraFiles: []*os.File{w}, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start the monitor process: %w", err)
	}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	got := make(chan monitorStatus, 1)
	go func() {
		var ms monitorStatus
		line, err := bufio.NewReader(r).ReadBytes('\n')
		if err != nil {
			ms.Error = "the monitor process exited before it was ready"
		} else if err := json.Unmarshal(line, &ms); err != nil {
			ms.Error = "the monitor process sent an unreadable report"
		}
		got <- ms
	}()
	var ms monitorStatus
	select {
	case ms = <-got:
	case <-time.After(timeout):
		ms.Error = fmt.Sprintf("the monitor process was not ready within %s", timeout)
	}
	if !ms.Ready {
		cmd.Process.Kill()
		cmd.Wait()
		if ms.Refusal != nil {
			return ms.Refusal
		}
		if b, err := os.ReadFile(filepath.Join(dir, MonitorLog)); err == nil && len(b) > 0 {
			return fmt.Errorf("%s (monitor log: %s)", ms.Error, tailOf(b, 600))
		}
		return fmt.Errorf("%s", ms.Error)
	}
	// The monitor outlives this hook: it is reparented once runc is done
	// with us, and ends with the operation.
	return cmd.Process.Release()
}

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
