package drain

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/watchdog/evidence"
	"github.com/gensee/gensee/spec"
)

// TestAll runs the kill step with fakes: two looks around the drain,
// then the escaped processes killed; the manifest's escapes are the listed
// ones marked killed, plus a descendant the kill found (reported too);
// drained counts the cgroup's and the escapes the kill ended.
func TestAll(t *testing.T) {
	at := time.Unix(1700000000, 0)
	p1, p2, p3 := cgroup.Proc{PID: 101, Start: 1}, cgroup.Proc{PID: 102, Start: 2}, cgroup.Proc{PID: 103, Start: 3}
	var order []string
	var reported []string
	listed := []evidence.Escape{{Proc: p1, Cgroup: "/other", At: at}}
	looks := 0
	k := Steps{
		look: func() []evidence.Unbound {
			looks++
			order = append(order, fmt.Sprintf("look%d", looks))
			if looks == 2 { // the second look finds p2
				e := evidence.Escape{Proc: p2, Cgroup: "/other2", At: at}
				listed = append(listed, e)
				return []evidence.Unbound{{Target: e.Target(), Escape: &e}}
			}
			return nil
		},
		listed:  func() []evidence.Escape { return listed },
		escaped: func() []cgroup.Proc { return []cgroup.Proc{p1, p2} },
		report:  func(u evidence.Unbound) { reported = append(reported, u.Target) },
		drain: func(_ context.Context, path string) (int, error) {
			order = append(order, "drain "+path)
			return 3, nil
		},
		kill: func(_ context.Context, procs []cgroup.Proc) []cgroup.Killed {
			order = append(order, fmt.Sprintf("kill %d", len(procs)))
			return []cgroup.Killed{
				{Proc: p1, Cgroup: "/other", Killed: true},
				{Proc: p2, Err: fmt.Errorf("open: %w", cgroup.ErrGone)}, // died with its pid namespace
				{Proc: p3, Parent: 101, Cgroup: "/other/sub", Killed: true},
				{Proc: cgroup.Proc{PID: 104, Start: 4}, Parent: 101, Cgroup: "/k/c1", Killed: true}, // moved back in
			}
		},
		now: func() time.Time { return at.Add(time.Second) },
	}
	x := All(context.Background(), "/k/c1", k)
	if want := []string{"look1", "drain /k/c1", "look2", "kill 2"}; !slices.Equal(order, want) {
		t.Errorf("order %q, want %q", order, want)
	}
	if want := []string{"pid 102 in /other2", "pid 103 in /other/sub"}; !slices.Equal(reported, want) {
		t.Errorf("reported %q, want %q", reported, want)
	}
	want := []spec.Escape{
		{PID: 101, Cgroup: "/other", At: at.UTC(), Killed: true},
		{PID: 102, Cgroup: "/other2", At: at.UTC()},
		{PID: 103, Cgroup: "/other/sub", At: at.Add(time.Second).UTC(), Killed: true},
	}
	if !slices.Equal(x.Escapes, want) {
		t.Errorf("escapes %+v\nwant %+v", x.Escapes, want)
	}
	if x.Drained != 3+3 {
		t.Errorf("drained %d, want 6 (3 in the cgroup, 3 ended by the kill)", x.Drained)
	}
}

// TestAllWithoutSensor: no binding sensor, the cgroup drain only.
func TestAllWithoutSensor(t *testing.T) {
	x := All(context.Background(), "/c", Steps{
		drain: func(context.Context, string) (int, error) { return 2, nil },
		kill:  func(context.Context, []cgroup.Proc) []cgroup.Killed { t.Fatal("kill without a sensor"); return nil },
	})
	if x.Drained != 2 || x.Escapes != nil {
		t.Fatalf("drained %d, escapes %v", x.Drained, x.Escapes)
	}
}
