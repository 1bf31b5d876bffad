package integration

import (
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
)

// TestCallerExecBeforeStart: an exec into a created task is refused (the
// deadline, the sensors and the gate arm at Start); once started it runs
// (issue 25, item 6).
func TestCallerExecBeforeStart(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	c, ctx := e.clientFor(t, "it-hostile")
	ctr := e.newClientContainer(t, c, ctx, "ebs", oci.WithProcessArgs("/bin/sleep", "300"))
	task, err := ctr.NewTask(ctx, cio.NullIO)
	must(t, err)
	sp, err := ctr.Spec(ctx)
	must(t, err)
	p := *sp.Process
	p.Args = []string{"/bin/true"}
	if _, err := task.Exec(ctx, "early", &p, cio.NullIO); err == nil || !strings.Contains(err.Error(), "exec_before_start") {
		t.Fatalf("exec into a created task: %v, want exec_before_start", err)
	}
	must(t, task.Start(ctx))
	proc, err := task.Exec(ctx, "late", &p, cio.NullIO)
	must(t, err)
	ch, err := proc.Wait(ctx)
	must(t, err)
	must(t, proc.Start(ctx))
	if st := <-ch; st.ExitCode() != 0 {
		t.Fatalf("exec into the started task: exit %d (%v)", st.ExitCode(), st.Error())
	}
	proc.Delete(ctx)
}
