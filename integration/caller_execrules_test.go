package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/record"
)

// TestCallerExecInitRules: an exec is held to its init's LSM labels and
// rlimits (issue 25, item 10): a higher RLIMIT_NOFILE, an AppArmor profile
// or SELinux label the init does not run under are refused; an exec that
// leaves out the init's RLIMIT_NOFILE runs with the init's, not the
// shim's; each admitted exec is a line of execs.jsonl.
func TestCallerExecInitRules(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	c, ctx := e.clientFor(t, "it-hostile")
	ctr := e.newClientContainer(t, c, ctx, "rules", oci.WithProcessArgs("/bin/sleep", "300"),
		oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Soft: 512, Hard: 512}))
	task, err := ctr.NewTask(ctx, cio.NullIO)
	must(t, err)
	must(t, task.Start(ctx))
	sp, err := ctr.Spec(ctx)
	must(t, err)
	for name, c := range map[string]struct {
		mut  func(*specs.Process)
		rule string
	}{
		"nofile": {func(p *specs.Process) {
			p.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 4096, Hard: 4096}}
		}, "exec_rlimit"},
		"memlock": {func(p *specs.Process) {
			p.Rlimits = append(p.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_MEMLOCK", Soft: 1 << 30, Hard: 1 << 30})
		}, "exec_rlimit"},
		"apparmor": {func(p *specs.Process) { p.ApparmorProfile = "unconfined" }, "exec_lsm"},
		"selinux":  {func(p *specs.Process) { p.SelinuxLabel = "system_u:system_r:spc_t:s0" }, "exec_lsm"},
	} {
		p := *sp.Process
		p.Rlimits = append([]specs.POSIXRlimit(nil), sp.Process.Rlimits...)
		p.Args = []string{"/bin/true"}
		c.mut(&p)
		if _, err := task.Exec(ctx, "x-"+name, &p, cio.NullIO); err == nil || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("exec %s: %v, want %s", name, err, c.rule)
		}
	}
	p := *sp.Process
	p.Rlimits = nil
	// The exit status says it (3: another limit), not the output: an
	// exec's output may still be in flight when its exit is reported.
	p.Args = []string{"/bin/sh", "-c", `test "$(ulimit -n)" = 512 || exit 3`}
	proc, err := task.Exec(ctx, "nolimits", &p, cio.NullIO)
	must(t, err)
	ch, err := proc.Wait(ctx)
	must(t, err)
	must(t, proc.Start(ctx))
	if st := <-ch; st.ExitCode() != 0 {
		t.Errorf("an exec without rlimits: exit %d (3: ulimit -n is not the init's 512)", st.ExitCode())
	}
	proc.Delete(ctx)
	dir, err := record.Store{Dir: e.state}.OperationDir(e.operation("it-hostile", "rules"))
	must(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "execs.jsonl"))
	if err != nil || !strings.Contains(string(b), `"exec_id":"nolimits"`) || !strings.Contains(string(b), `"rlimits_from_init":["RLIMIT_NOFILE"]`) || strings.Contains(string(b), "x-nofile") {
		t.Errorf("execs.jsonl: %v\n%s", err, b)
	}
}
