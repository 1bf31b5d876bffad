package evidence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
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
	// Target names the escaped process, "pid 1234 in /other/cgroup"; ""
	// when the cgroup itself is gone or was replaced.
	Target string
	Escape *Escape // the escaped process; nil for the cgroup itself
}

// Escape is a process of the container found outside the bound cgroup.
type Escape struct {
	cgroup.Proc
	Cgroup string    // where it was found
	At     time.Time // when
}

// Target is how an escape is named in events: "pid 1234 in /other".
func (e Escape) Target() string { return fmt.Sprintf("pid %d in %s", e.PID, e.Cgroup) }

// MaxEscapes bounds the escapes a poller lists and reports one by one; past
// it one more Unbound says so, and further escapees are still remembered
// (Escaped) for the exit path to kill.
const MaxEscapes = 256

// Bounds on the pid-namespace scan, which reads /proc of the whole host:
// at most nsReadsPerPoll namespace links per poll (the rest wait for the
// next), each pid's namespace re-read every nsRefreshPolls polls (a pid
// cannot change its pid namespace, and pids are allocated cyclically, so
// a cached answer goes stale only if its pid was freed and reused between
// two listings).
//
// The scan also keeps to a duty cycle: after a scan that took d, the next
// one waits at least nsDuty*d (1% of a core at most, whatever the host's
// size); the cgroup's own members are still checked every poll.
const (
	nsReadsPerPoll = 512
	nsRefreshPolls = 20
	nsDuty         = 100
)

// BindingPoller checks that the cgroup the table's rules match is still the
// container's cgroup and still holds every process of the container.
//
// The container's processes are: every process ever seen in the bound
// cgroup or below it (cgroup.procs; remembered with its start time, so a
// reused pid is never mistaken for it), and every process of the
// container's pid namespace when the container has its own (its init is pid
// 1 there). In a joined pid namespace (a pod's), other containers' processes
// share it, so only children of processes already known count. A process of
// the container whose cgroup v2 path is neither the bound cgroup nor below
// it is an escape, reported once.
type BindingPoller struct {
	Interval time.Duration // DefaultInterval if 0
	ref      netpolicy.CgroupRef
	idOf     func(path string) (uint64, error)
	pathOf   func(pid int) (string, error)
	members  func() ([]int, error) // pids in the bound cgroup's subtree
	src      procSource
	ns       uint64 // the container's pid namespace; 0: none to scan
	private  bool   // ns is the container's own
	scope    string // what is scanned, in words
	now      func() time.Time

	mu      sync.Mutex        // guards everything below; one poll at a time
	shown   string            // the cgroup's own problems last reported
	tracked map[int]tracked   // the container's processes, by pid
	nsSeen  map[int]nsVerdict // pid namespace of other pids, cached
	polls   uint64            // polls done
	nsNext  time.Time         // no namespace scan before this, see nsDuty
	escapes []Escape          // listed, len <= MaxEscapes
	over    int               // escapes past MaxEscapes
}

type tracked struct {
	start   uint64
	escaped bool      // reported (or counted) already: never again
	first   time.Time // first seen
}

// transitMax bounds how long a process may look like runc's exec init in
// transit (see inTransit) before it is judged like any other.
const transitMax = 2 * time.Second

type nsVerdict struct {
	ours bool   // in the container's pid namespace (and, when joined, its child)
	at   uint64 // poll that read it
}

// NewBindingPoller checks ref in hierarchy h for the processes of the
// container whose init is init (alive now: the task was just started).
// When init's pid namespace cannot be read, or is the shim's own, only the
// cgroup's members are followed; Scope says which.
func NewBindingPoller(h cgroup.Hierarchy, ref netpolicy.CgroupRef, init cgroup.Proc) *BindingPoller {
	p := newBindingPoller(ref, hostProc{})
	p.idOf, p.pathOf = h.ID, cgroup.PathOf
	p.members = func() ([]int, error) { return h.Procs(ref.Path) }
	ns, private, host, err := initNS(p.src, init)
	switch {
	case err != nil:
		p.scope = "members of " + ref.Path + " only: " + err.Error()
	case host:
		p.scope = "members of " + ref.Path + " only: init shares the shim's pid namespace"
	default:
		p.ns, p.private = ns, private
		kind := "its own"
		if !private {
			kind = "joined; children of known processes only"
		}
		p.scope = fmt.Sprintf("members of %s and pid namespace %d (%s)", ref.Path, ns, kind)
	}
	if init.PID > 0 {
		p.tracked[init.PID] = tracked{start: init.Start, first: p.now()}
	}
	return p
}

func newBindingPoller(ref netpolicy.CgroupRef, src procSource) *BindingPoller {
	return &BindingPoller{ref: ref, src: src, now: time.Now,
		tracked: map[int]tracked{}, nsSeen: map[int]nsVerdict{}}
}

// Scope says which processes the poller follows.
func (p *BindingPoller) Scope() string { return p.scope }

// Run checks until ctx is done (then it returns nil), calling report on its
// goroutine when the cgroup breaks or breaks differently, and once per
// escaped process.
func (p *BindingPoller) Run(ctx context.Context, report func(Unbound)) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, u := range p.check(nsScanDue) {
			report(u)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// CheckAfterExit polls once now and returns what is new: the exit path's
// look, once the init has exited. Safe to call while Run runs; each finding
// is returned to one caller only. A joined pid namespace is scanned
// whatever the duty cycle. When the init was pid 1 of its own pid
// namespace, that namespace is not scanned: the kernel reports such an
// init's exit only after it has killed and reaped every other process of
// the namespace (zap_pid_ns_processes runs before the exit is notified),
// so nothing of it is left to find, and the scan reads /proc of the whole
// host. The bound cgroup's members and every process already tracked are
// checked either way.
func (p *BindingPoller) CheckAfterExit() []Unbound {
	if p.private {
		return p.check(nsScanNever)
	}
	return p.check(nsScanNow)
}

// nsScan says when a poll scans the container's pid namespace.
type nsScan int

const (
	nsScanDue   nsScan = iota // when its duty cycle allows (Run)
	nsScanNow                 // now
	nsScanNever               // not at all
)

// check polls once, scanning the namespace as scan says.
func (p *BindingPoller) check(scan nsScan) []Unbound {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	now := p.now()
	var out []Unbound
	if d := p.cgroupProblems(); d != p.shown {
		p.shown = d
		if d != "" {
			out = append(out, Unbound{At: now, Detail: d})
		}
	}
	inside := map[int]bool{}
	if p.members != nil {
		pids, _ := p.members() // an unreadable cgroup was reported above
		for _, pid := range pids {
			inside[pid] = true
		}
	}
	for pid := range inside {
		if _, ok := p.tracked[pid]; !ok {
			if st, err := p.src.Stat(pid); err == nil {
				p.tracked[pid] = tracked{start: st.Start, first: now}
			}
		}
	}
	for pid, t := range p.tracked {
		if inside[pid] {
			continue
		}
		if st, err := p.src.Stat(pid); err != nil || st.Start != t.start {
			delete(p.tracked, pid) // exited; its pid may be reused
			continue
		}
		if !t.escaped {
			out = p.judge(out, cgroup.Proc{PID: pid, Start: t.start}, t.first, now)
		}
	}
	if p.ns != 0 && (scan == nsScanNow || scan == nsScanDue && !now.Before(p.nsNext)) {
		out = p.scanNS(out, inside, now)
		p.nsNext = now.Add(nsDuty * p.now().Sub(now))
	}
	return out
}

// cgroupProblems says what is wrong with the bound cgroup itself; "" when
// nothing is.
func (p *BindingPoller) cgroupProblems() string {
	id, err := p.idOf(p.ref.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("cgroup %s is gone (the rules match cgroup id %d)", p.ref.Path, p.ref.ID)
	case err != nil:
		return fmt.Sprintf("cgroup %s cannot be read: %v", p.ref.Path, err)
	case id != p.ref.ID:
		return fmt.Sprintf("cgroup %s is now id %d; the rules match id %d", p.ref.Path, id, p.ref.ID)
	}
	return ""
}

// scanNS follows the processes of the container's pid namespace that were
// not in the bound cgroup when it was listed. Only their namespace link is
// read, and only for pids not classified recently (see nsReadsPerPoll).
func (p *BindingPoller) scanNS(out []Unbound, inside map[int]bool, now time.Time) []Unbound {
	pids, err := p.src.List()
	if err != nil {
		return out
	}
	listed := make(map[int]bool, len(pids))
	budget := nsReadsPerPoll
	for _, pid := range pids {
		listed[pid] = true
		if inside[pid] {
			continue
		}
		if _, ok := p.tracked[pid]; ok {
			continue // judged above
		}
		v, ok := p.nsSeen[pid]
		if !ok || p.polls-v.at >= nsRefreshPolls {
			if budget == 0 {
				continue // next poll
			}
			budget--
			ns, err := p.src.PidNS(pid)
			if err != nil {
				delete(p.nsSeen, pid) // exited
				continue
			}
			v = nsVerdict{ours: ns == p.ns, at: p.polls}
			p.nsSeen[pid] = v
		}
		if !v.ours {
			continue
		}
		st, err := p.src.Stat(pid)
		if err != nil {
			continue
		}
		if !p.private {
			if _, known := p.tracked[st.PPID]; !known {
				p.nsSeen[pid] = nsVerdict{at: v.at} // another container of the pod
				continue
			}
		}
		delete(p.nsSeen, pid)
		p.tracked[pid] = tracked{start: st.Start, first: now}
		out = p.judge(out, cgroup.Proc{PID: pid, Start: st.Start}, now, now)
	}
	for pid := range p.nsSeen {
		if !listed[pid] {
			delete(p.nsSeen, pid)
		}
	}
	return out
}

// judge reads pr's cgroup and, when it is outside the bound one, records
// and reports the escape, unless pr (first seen at first) is an exec in
// transit. pr must be tracked; one not judged now is judged again at the
// next poll.
func (p *BindingPoller) judge(out []Unbound, pr cgroup.Proc, first, now time.Time) []Unbound {
	path, err := p.pathOf(pr.PID)
	if err != nil || p.bound(path) {
		return out // exited, or inside
	}
	if now.Sub(first) < transitMax && p.inTransit(pr, path) {
		return out
	}
	// The pid may have been freed and reused while its cgroup was read.
	if st, err := p.src.Stat(pr.PID); err != nil || st.Start != pr.Start {
		return out
	}
	p.tracked[pr.PID] = tracked{start: pr.Start, escaped: true}
	e := Escape{Proc: pr, Cgroup: path, At: now}
	if len(p.escapes) >= MaxEscapes {
		p.over++
		if p.over == 1 {
			out = append(out, Unbound{At: now, Detail: fmt.Sprintf(
				"more than %d processes of the container are outside %s the rules bind: further ones are killed at exit but not listed",
				MaxEscapes, p.ref.Path)})
		}
		return out
	}
	p.escapes = append(p.escapes, e)
	return append(out, Unbound{At: now, Target: e.Target(), Escape: &e,
		Detail: fmt.Sprintf("process %d is in cgroup %s, outside %s the rules bind", pr.PID, path, p.ref.Path)})
}

// inTransit reports whether pr, found in cgroup path outside the bound
// one, is what an exec looks like before runc has moved it: on a host
// where runc cannot clone into the container's cgroup (a hybrid one), its
// exec init enters the container's pid namespace first and stays in the
// cgroup of the runc exec process that made it (the shim's, conmon's)
// until runc adds it to the container's cgroup, before any of the
// workload's code runs. So: its parent is outside the container's pid
// namespace (only the runtime puts processes there from outside; the
// workload's own children have parents inside it, or the reaper of the
// exec'd) and it sits in its parent's very cgroup. Such a process is
// judged again at every poll and, past transitMax from when it was first
// seen, like any other; one that moved anywhere else is judged at once.
func (p *BindingPoller) inTransit(pr cgroup.Proc, path string) bool {
	if p.ns == 0 {
		return false
	}
	st, err := p.src.Stat(pr.PID)
	if err != nil || st.PPID <= 0 {
		return false
	}
	if ns, err := p.src.PidNS(st.PPID); err != nil || ns == p.ns {
		return false
	}
	pp, err := p.pathOf(st.PPID)
	return err == nil && pp == path
}

// bound reports whether cgroup path is the bound cgroup or below it.
func (p *BindingPoller) bound(path string) bool { return cgroup.Within(path, p.ref.Path) }

// Escapes lists the escapes found so far (at most MaxEscapes), oldest
// first, whether or not the process still lives.
func (p *BindingPoller) Escapes() []Escape {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.escapes)
}

// Escaped lists the escaped processes alive at the last poll, listed or
// not: what the exit path must kill.
func (p *BindingPoller) Escaped() []cgroup.Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cgroup.Proc
	for pid, t := range p.tracked {
		if t.escaped {
			out = append(out, cgroup.Proc{PID: pid, Start: t.start})
		}
	}
	slices.SortFunc(out, func(a, b cgroup.Proc) int { return a.PID - b.PID })
	return out
}
