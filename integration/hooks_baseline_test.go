package integration

import (
	"path/filepath"
	"testing"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestHooksBaseline: podman (libpod) makes /etc/mtab in the container's
// upperdir before the container starts; the hook's monitor takes the
// upperdir's baseline when it binds (baseline.json), so that symlink is not
// the workload's: under unclaimed "fail" a container that leaves it alone
// passes with nothing unclaimed. A workload that rewrites it (ln -sf, or rm
// and a regular file in its place) has that counted as its own unclaimed
// change, and the gate fails.
func TestHooksBaseline(t *testing.T) {
	c := denyAll("baseline")
	c.Unclaimed = spec.UnclaimedFail
	p := startPodman(t, c)
	cases := []struct {
		name, script string
		changed      bool
	}{
		{"kept", "test -L /etc/mtab && cat /etc/base.txt >/dev/null", false},
		{"relinked", "ln -sf /proc/mounts /etc/mtab", true},
		{"replaced", "rm /etc/mtab && echo x >/etc/mtab", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := p.run("mtab-"+tc.name, []string{"--network=none"}, "/bin/sh", "-c", tc.script)
			if code != 0 {
				t.Fatalf("podman run: exit %d\n%s", code, out)
			}
			_, m := p.lastOperation(t)
			dir, err := record.Store{Dir: p.e.state}.OperationDir(m.OperationID)
			must(t, err)
			var b gate.Baseline
			must(t, record.Store{Dir: p.e.state}.ReadJSON(m.OperationID, record.BaselineFile, &b))
			if !baselineHolds(b, "etc/mtab") {
				t.Fatalf("%s holds no etc/mtab: %+v", filepath.Join(dir, record.BaselineFile), b.Entries)
			}
			flagged := false
			for _, v := range m.Gate.Violations {
				flagged = flagged || (v.Rule == gate.RuleUnclaimedChange && v.Path == "/etc/mtab")
			}
			if !tc.changed {
				if m.Unclaimed.Count != 0 || m.Gate.Verdict != spec.VerdictPass || m.Excluded.Count == 0 {
					t.Fatalf("/etc/mtab left as podman made it: unclaimed %+v, gate %+v, excluded %+v", m.Unclaimed, m.Gate, m.Excluded)
				}
			} else if m.Unclaimed.Count == 0 || m.Gate.Verdict != spec.VerdictFail || !flagged {
				t.Fatalf("/etc/mtab rewritten by the workload: unclaimed %+v, gate %+v", m.Unclaimed, m.Gate)
			}
			p.finishedAtPoststop(t, m)
		})
	}
}

func baselineHolds(b gate.Baseline, path string) bool {
	for _, e := range b.Entries {
		if e.Path == path {
			return true
		}
	}
	return false
}
