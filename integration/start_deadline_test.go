package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
)

// TestStartDeadline: the shim answers a task's start in its own process
// (service.frontMonitor), and a Start whose init never completes runc's
// exec-fifo handshake (here stopped) still ends with its caller's
// deadline, as a run of the front or of runc would: once the shim has
// given up too, the init, resumed, never runs the container's process,
// and the task answers the API at once.
func TestStartDeadline(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	c, ctx := e.clientFor(t, "it-hostile")
	ctr := e.newClientContainer(t, c, ctx, "stopinit", oci.WithProcessArgs("/bin/sleep", "300"))
	task, err := ctr.NewTask(ctx, cio.NullIO)
	must(t, err)
	pid := int(task.Pid())
	must(t, syscall.Kill(pid, syscall.SIGSTOP))
	defer syscall.Kill(pid, syscall.SIGKILL)

	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = task.Start(sctx)
	cancel()
	if err == nil {
		t.Fatal("Start of a stopped init returned no error")
	}
	// The shim's copy of the deadline ends a little after the caller's:
	// the task's state answers once the shim's start has given up (it
	// waits on the same lock).
	answered := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := task.Status(qctx)
		cancel()
		if err == nil {
			answered = true
			break
		}
	}
	if !answered {
		t.Fatal("the task's status did not answer within 10s of the failed Start: its start still holds it")
	}
	must(t, syscall.Kill(pid, syscall.SIGCONT))
	time.Sleep(time.Second)
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmd), "sleep") {
		t.Errorf("the caller and the shim gave up on the start, and the container's process runs: %q", cmd)
	}
	kctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	t0 := time.Now()
	err = task.Kill(kctx, syscall.SIGKILL)
	cancel()
	if (err != nil && !errdefs.IsNotFound(err)) || time.Since(t0) > 5*time.Second {
		t.Errorf("Kill after the failed Start: %v after %v", err, time.Since(t0))
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := task.Delete(dctx, client.WithProcessKill); err != nil {
		t.Errorf("delete: %v", err)
	}
}
