package evidence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
)

// Unbound is evidence the table no longer binds the container: its cgroup
// is gone or has another id than the rules match, or one of its processes
// is outside it.
type Unbound struct {
	At     time.Time
	Detail string
}

// BindingPoller checks that the cgroup the table's rules match is still the
// container's cgroup and still holds the container's processes.
type BindingPoller struct {
	Interval time.Duration // DefaultInterval if 0
	ref      netpolicy.CgroupRef
	pids     func() []int
	idOf     func(path string) (uint64, error)
	pathOf   func(pid int) (string, error)
	now      func() time.Time
}

// NewBindingPoller checks ref in hierarchy h for the processes pids lists
// (the container's live processes, which the shim reaps: a listed pid
// cannot have been reused).
func NewBindingPoller(h cgroup.Hierarchy, ref netpolicy.CgroupRef, pids func() []int) *BindingPoller {
	return &BindingPoller{ref: ref, pids: pids, idOf: h.ID, pathOf: cgroup.PathOf, now: time.Now}
}

// Run checks until ctx is done (then it returns nil), calling report on its
// goroutine when the binding breaks or breaks differently.
func (p *BindingPoller) Run(ctx context.Context, report func(Unbound)) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	shown := ""
	for {
		if d := p.check(); d != shown {
			shown = d
			if d != "" {
				report(Unbound{At: p.now(), Detail: d})
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check lists what breaks the binding; "" when nothing does.
func (p *BindingPoller) check() string {
	var probs []string
	id, err := p.idOf(p.ref.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		probs = append(probs, fmt.Sprintf("cgroup %s is gone (the rules match cgroup id %d)", p.ref.Path, p.ref.ID))
	case err != nil:
		probs = append(probs, fmt.Sprintf("cgroup %s cannot be read: %v", p.ref.Path, err))
	case id != p.ref.ID:
		probs = append(probs, fmt.Sprintf("cgroup %s is now id %d; the rules match id %d", p.ref.Path, id, p.ref.ID))
	}
	for _, pid := range p.pids() {
		path, err := p.pathOf(pid)
		if err != nil {
			continue // exited
		}
		if path != p.ref.Path && !strings.HasPrefix(path, strings.TrimSuffix(p.ref.Path, "/")+"/") {
			probs = append(probs, fmt.Sprintf("process %d is in cgroup %s, outside %s the rules bind", pid, path, p.ref.Path))
		}
	}
	return strings.Join(probs, "; ")
}
