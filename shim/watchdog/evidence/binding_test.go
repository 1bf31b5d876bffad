package evidence

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/netpolicy"
)

func TestBindingCheck(t *testing.T) {
	ref := netpolicy.CgroupRef{Path: "/k/c1", ID: 42, Level: 2}
	for _, c := range []struct {
		name  string
		id    uint64
		idErr error
		paths map[int]string
		want  string // substring; "" means bound
	}{
		{"bound", 42, nil, map[int]string{1: "/k/c1", 2: "/k/c1/sub"}, ""},
		{"exited process ignored", 42, nil, map[int]string{}, ""},
		{"cgroup recreated", 43, nil, nil, "now id 43; the rules match id 42"},
		{"cgroup gone", 0, fs.ErrNotExist, nil, "is gone"},
		{"process moved out", 42, nil, map[int]string{1: "/k/c1", 2: "/k"}, "process 2 is in cgroup /k, outside /k/c1"},
		{"sibling with a common prefix", 42, nil, map[int]string{2: "/k/c10"}, "process 2 is in cgroup /k/c10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &BindingPoller{ref: ref,
				pids: func() []int { return []int{1, 2} },
				idOf: func(string) (uint64, error) { return c.id, c.idErr },
				pathOf: func(pid int) (string, error) {
					if s, ok := c.paths[pid]; ok {
						return s, nil
					}
					return "", fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
				},
			}
			got := p.check()
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("check = %q, want %q", got, c.want)
			}
		})
	}
}

// TestBindingPollerReportsChanges: once per change, not per poll.
func TestBindingPollerReportsChanges(t *testing.T) {
	var mu sync.Mutex
	id := uint64(42)
	p := &BindingPoller{Interval: 5 * time.Millisecond, ref: netpolicy.CgroupRef{Path: "/c", ID: 42}, now: time.Now,
		pids:   func() []int { return nil },
		idOf:   func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); return id, nil },
		pathOf: func(int) (string, error) { return "/c", nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Unbound, 8)
	done := make(chan error)
	go func() { done <- p.Run(ctx, func(u Unbound) { out <- u }) }()
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	id = 7
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("%d reports, want 1", len(out))
	}
}
