package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
)

// TestStartDeadline: the shim answers a task's start in its own process
// (service.frontMonitor), and a Start whose init never completes runc's
// exec-fifo handshake (here stopped) still ends with its caller's
// deadline, as a run of the front or of runc would: the container stays
// created when the init resumes (not started behind the caller's back),
// and the task is killed through the API at once.
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
	t0 := time.Now()
	err = task.Start(sctx)
	cancel()
	if err == nil {
		t.Fatal("Start of a stopped init returned no error")
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Fatalf("Start with a 2s deadline returned after %v", took)
	}
	must(t, syscall.Kill(pid, syscall.SIGCONT))
	time.Sleep(time.Second)
	st, err := task.Status(ctx)
	must(t, err)
	if st.Status == "running" {
		t.Errorf("the caller was told Start failed, and the container runs (status %q)", st.Status)
	}
	kctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	t0 = time.Now()
	err = task.Kill(kctx, syscall.SIGKILL)
	cancel()
	if err != nil || time.Since(t0) > 5*time.Second {
		t.Errorf("Kill after the failed Start: %v after %v", err, time.Since(t0))
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := task.Delete(dctx, client.WithProcessKill); err != nil {
		t.Errorf("delete: %v", err)
	}
}
