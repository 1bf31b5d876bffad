package evidence

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
)

// fakeProc is a /proc: pid -> process. Safe for the poller's one goroutine.
type fakeProc struct {
	procs   map[int]fakeP
	nsReads int
	stats   int
	lists   int
}

type fakeP struct {
	start uint64
	ppid  int
	ns    uint64
	cg    string
}

func (f *fakeProc) List() ([]int, error) {
	f.lists++
	var out []int
	for pid := range f.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeProc) PidNS(pid int) (uint64, error) {
	f.nsReads++
	p, ok := f.procs[pid]
	if !ok {
		return 0, fs.ErrNotExist
	}
	return p.ns, nil
}

func (f *fakeProc) Stat(pid int) (cgroup.Stat, error) {
	f.stats++
	p, ok := f.procs[pid]
	if !ok {
		return cgroup.Stat{}, cgroup.ErrGone
	}
	return cgroup.Stat{Start: p.start, PPID: p.ppid}, nil
}

func (f *fakeProc) pathOf(pid int) (string, error) {
	p, ok := f.procs[pid]
	if !ok {
		return "", fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
	}
	return p.cg, nil
}

// members lists the pids whose cgroup is at or below path.
func (f *fakeProc) members(path string) func() ([]int, error) {
	return func() ([]int, error) {
		var out []int
		for pid, p := range f.procs {
			if p.cg == path || strings.HasPrefix(p.cg, path+"/") {
				out = append(out, pid)
			}
		}
		return out, nil
	}
}

const ourNS, hostNS = 4026532001, 4026531836

// fakePoller binds /k/c1 (id 42) for init pid 1; ns 0 means no namespace
// scan.
func fakePoller(f *fakeProc, ns uint64, private bool) *BindingPoller {
	ref := netpolicy.CgroupRef{Path: "/k/c1", ID: 42, Level: 2}
	p := newBindingPoller(ref, f)
	p.idOf = func(string) (uint64, error) { return 42, nil }
	p.pathOf = f.pathOf
	p.members = f.members(ref.Path)
	p.ns, p.private = ns, private
	p.now = func() time.Time { return time.Unix(1700000000, 0) }
	if ip, ok := f.procs[1]; ok {
		p.tracked[1] = tracked{start: ip.start}
	}
	return p
}

func targets(us []Unbound) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Target)
	}
	return out
}

func TestBindingEscapes(t *testing.T) {
	in := func(start uint64, ppid int, cg string) fakeP {
		return fakeP{start: start, ppid: ppid, ns: ourNS, cg: cg}
	}
	host := func(start uint64, cg string) fakeP { return fakeP{start: start, ppid: 1, ns: hostNS, cg: cg} }
	type poll struct {
		change func(f *fakeProc)
		want   []string // targets of the Unbounds this poll returns
	}
	for _, c := range []struct {
		name    string
		procs   map[int]fakeP
		ns      uint64
		private bool
		polls   []poll
	}{
		{"all inside", map[int]fakeP{1: in(10, 0, "/k/c1"), 2: in(11, 1, "/k/c1/sub"), 900: host(5, "/system.slice")},
			ourNS, true, []poll{{nil, nil}, {nil, nil}}},
		{"member moves out: once", map[int]fakeP{1: in(10, 0, "/k/c1"), 2: in(11, 1, "/k/c1")}, 0, false, []poll{
			{nil, nil},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/k/other"; f.procs[2] = p }, []string{"pid 2 in /k/other"}},
			{nil, nil},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/elsewhere"; f.procs[2] = p }, nil},
		}},
		{"sibling with a common prefix", map[int]fakeP{1: in(10, 0, "/k/c1"), 2: in(11, 1, "/k/c1")}, 0, false, []poll{
			{nil, nil},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/k/c10"; f.procs[2] = p }, []string{"pid 2 in /k/c10"}},
		}},
		{"reused pid is not the member", map[int]fakeP{1: in(10, 0, "/k/c1"), 2: in(11, 1, "/k/c1")}, 0, false, []poll{
			{nil, nil},
			{func(f *fakeProc) { f.procs[2] = host(99, "/user.slice") }, nil},
			{nil, nil},
		}},
		{"moved out and back: still one", map[int]fakeP{1: in(10, 0, "/k/c1"), 2: in(11, 1, "/k/c1")}, 0, false, []poll{
			{nil, nil},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/x"; f.procs[2] = p }, []string{"pid 2 in /x"}},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/k/c1"; f.procs[2] = p }, nil},
			{func(f *fakeProc) { p := f.procs[2]; p.cg = "/y"; f.procs[2] = p }, nil},
		}},
		{"private pid ns: never a member, found by namespace", map[int]fakeP{
			1: in(10, 0, "/k/c1"), 5: in(12, 1, "/other"), 6: host(3, "/other")}, ourNS, true, []poll{
			{nil, []string{"pid 5 in /other"}},
			{nil, nil},
		}},
		{"private pid ns: orphan reparented anywhere counts", map[int]fakeP{
			1: in(10, 0, "/k/c1"), 7: in(12, 4242, "/other")}, ourNS, true, []poll{
			{nil, []string{"pid 7 in /other"}},
		}},
		{"joined pid ns: only children of known processes", map[int]fakeP{
			1: in(10, 0, "/k/c1"), 7: in(12, 300, "/pod/neighbour"), 300: in(2, 0, "/pod/pause")}, ourNS, false, []poll{
			{nil, nil},
			{func(f *fakeProc) { f.procs[8] = in(13, 1, "/pod/x") }, []string{"pid 8 in /pod/x"}},
			{nil, nil},
		}},
		{"host processes are never read past their namespace", map[int]fakeP{
			1: in(10, 0, "/k/c1"), 900: host(5, "/k/c1-not"), 901: host(6, "/")}, ourNS, true, []poll{{nil, nil}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeProc{procs: c.procs}
			p := fakePoller(f, c.ns, c.private)
			var all []string
			for i, pl := range c.polls {
				if pl.change != nil {
					pl.change(f)
				}
				got := targets(p.check(nsScanNow))
				if !slices.Equal(got, pl.want) {
					t.Fatalf("poll %d: targets %q, want %q", i, got, pl.want)
				}
				all = append(all, got...)
			}
			var listed []string
			for _, e := range p.Escapes() {
				listed = append(listed, e.Target())
			}
			if !slices.Equal(listed, all) {
				t.Errorf("Escapes %q, reported %q", listed, all)
			}
		})
	}
}

// TestBindingRaceOnReuse: a pid whose cgroup reads outside but whose start
// time changed meanwhile is another process: no escape.
func TestBindingRaceOnReuse(t *testing.T) {
	f := &fakeProc{procs: map[int]fakeP{1: {start: 10, ns: ourNS, cg: "/k/c1"}, 2: {start: 11, ppid: 1, ns: ourNS, cg: "/k/c1"}}}
	p := fakePoller(f, 0, false)
	p.check(nsScanNow)
	p.pathOf = func(pid int) (string, error) {
		f.procs[pid] = fakeP{start: 77, cg: "/host"} // reused while the cgroup was read
		return "/host", nil
	}
	if got := p.check(nsScanNow); len(got) != 0 {
		t.Fatalf("unbound %+v for a reused pid", got)
	}
	if e := p.Escaped(); len(e) != 0 {
		t.Fatalf("Escaped = %v", e)
	}
}

// TestBindingNSScanBounded: namespace links are read at most
// nsReadsPerPoll per poll, then only every nsRefreshPolls polls.
func TestBindingNSScanBounded(t *testing.T) {
	f := &fakeProc{procs: map[int]fakeP{1: {start: 10, ns: ourNS, cg: "/k/c1"}}}
	const host = 1000
	for pid := 100; pid < 100+host; pid++ {
		f.procs[pid] = fakeP{start: 1, ns: hostNS, cg: "/system.slice"}
	}
	p := fakePoller(f, ourNS, true)
	var reads []int
	for i := 0; i < nsRefreshPolls+2; i++ {
		f.nsReads = 0
		p.check(nsScanNow)
		reads = append(reads, f.nsReads)
	}
	if reads[0] != nsReadsPerPoll || reads[1] != host-nsReadsPerPoll || reads[2] != 0 {
		t.Fatalf("namespace reads per poll %v, want %d, %d, 0, ...", reads, nsReadsPerPoll, host-nsReadsPerPoll)
	}
	if reads[nsRefreshPolls] == 0 {
		t.Errorf("no re-read after %d polls: %v", nsRefreshPolls, reads)
	}
	// An exited pid leaves the cache.
	delete(f.procs, 100)
	p.check(nsScanNow)
	if _, ok := p.nsSeen[100]; ok {
		t.Error("exited pid still cached")
	}
}

func TestBindingEscapesCapped(t *testing.T) {
	f := &fakeProc{procs: map[int]fakeP{1: {start: 10, ns: ourNS, cg: "/k/c1"}}}
	const n = MaxEscapes + 40
	for pid := 2; pid < 2+n; pid++ {
		f.procs[pid] = fakeP{start: 20, ppid: 1, ns: ourNS, cg: "/out"}
	}
	p := fakePoller(f, ourNS, true)
	got := p.check(nsScanNow) // n < nsReadsPerPoll: all classified in one poll
	if len(got) != MaxEscapes+1 || got[MaxEscapes].Target != "" || !strings.Contains(got[MaxEscapes].Detail, "not listed") {
		t.Fatalf("%d unbounds, want %d escapes and one overflow note", len(got), MaxEscapes)
	}
	if again := p.check(nsScanNow); len(again) != 0 {
		t.Fatalf("second poll: %d unbounds", len(again))
	}
	if len(p.Escapes()) != MaxEscapes || len(p.Escaped()) != n {
		t.Fatalf("listed %d, remembered %d; want %d, %d", len(p.Escapes()), len(p.Escaped()), MaxEscapes, n)
	}
}

func TestBindingCgroupItself(t *testing.T) {
	ref := netpolicy.CgroupRef{Path: "/k/c1", ID: 42, Level: 2}
	for _, c := range []struct {
		name  string
		id    uint64
		idErr error
		want  string // substring; "" means bound
	}{
		{"bound", 42, nil, ""},
		{"cgroup recreated", 43, nil, "now id 43; the rules match id 42"},
		{"cgroup gone", 0, fs.ErrNotExist, "is gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newBindingPoller(ref, &fakeProc{})
			p.idOf = func(string) (uint64, error) { return c.id, c.idErr }
			p.pathOf = func(int) (string, error) { return "", fs.ErrNotExist }
			got := p.check(nsScanNow)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("unbound %+v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0].Detail, c.want) || got[0].Target != "" || got[0].Escape != nil {
				t.Fatalf("check = %+v, want one %q with no target", got, c.want)
			}
			if again := p.check(nsScanNow); len(again) != 0 {
				t.Fatalf("reported twice: %+v", again)
			}
		})
	}
}

func TestParseNSLink(t *testing.T) {
	if n, err := parseNSLink("pid:[4026531836]"); err != nil || n != 4026531836 {
		t.Errorf("parse = %d, %v", n, err)
	}
	for _, bad := range []string{"net:[1]", "pid:[]", "pid:[x]", "pid:4"} {
		if _, err := parseNSLink(bad); err == nil {
			t.Errorf("parse %q: want error", bad)
		}
	}
}

// TestBindingPollerReportsChanges: once per change, not per poll.
func TestBindingPollerReportsChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		id := uint64(42)
		p := newBindingPoller(netpolicy.CgroupRef{Path: "/c", ID: 42}, &fakeProc{})
		const interval = 5 * time.Millisecond
		p.Interval = interval
		p.idOf = func(string) (uint64, error) { mu.Lock(); defer mu.Unlock(); return id, nil }
		p.pathOf = func(int) (string, error) { return "/c", nil }
		ctx, cancel := context.WithCancel(t.Context()) // t.Context ends Run if the test fails first
		out := make(chan Unbound, 8)
		done := make(chan error)
		go func() { done <- p.Run(ctx, func(u Unbound) { out <- u }) }()
		time.Sleep(4 * interval)
		synctest.Wait()
		if len(out) != 0 {
			t.Fatalf("%d reports while the cgroup is bound", len(out))
		}
		mu.Lock()
		id = 7
		mu.Unlock()
		time.Sleep(interval)
		synctest.Wait()
		if len(out) != 1 {
			t.Fatalf("%d reports at the poll after the cgroup changed, want 1", len(out))
		}
		time.Sleep(10 * interval)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 {
			t.Fatalf("%d reports, want 1", len(out))
		}
	})
}

// TestBindingNSDuty: after a scan that took d, Run's polls skip the
// namespace scan for nsDuty*d; a forced poll always scans.
func TestBindingNSDuty(t *testing.T) {
	f := &fakeProc{procs: map[int]fakeP{1: {start: 10, ns: ourNS, cg: "/k/c1"}, 900: {start: 1, ns: hostNS, cg: "/"}}}
	p := fakePoller(f, ourNS, true)
	clock := time.Unix(1700000000, 0)
	p.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	p.check(nsScanDue)
	f.procs[5] = fakeP{start: 12, ppid: 1, ns: ourNS, cg: "/out"}
	if got := p.check(nsScanDue); len(got) != 0 {
		t.Fatalf("scanned within the duty cycle: %+v", got)
	}
	if got := p.check(nsScanNow); len(got) != 1 || got[0].Target != "pid 5 in /out" {
		t.Fatalf("forced check = %+v", got)
	}
}

// TestBindingRunFirstPollScans: Run's first poll, as the task starts,
// scans the pid namespace: a process moved out of the cgroup before it is
// found then, even when the task ends before the next poll (its own
// namespace is not scanned after the init's exit).
func TestBindingRunFirstPollScans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeProc{procs: map[int]fakeP{
			1:   {start: 10, ns: ourNS, cg: "/k/c1"},
			5:   {start: 12, ppid: 1, ns: ourNS, cg: "/out"},
			900: {start: 1, ns: hostNS, cg: "/"},
		}}
		p := fakePoller(f, ourNS, true)
		p.now = time.Now // the bubble's clock
		p.Interval = time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		out := make(chan Unbound, 8)
		done := make(chan error)
		go func() { done <- p.Run(ctx, func(u Unbound) { out <- u }) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || (<-out).Target != "pid 5 in /out" {
			t.Fatalf("first poll: %d reports; want the escape of pid 5", len(out))
		}
		if e := p.Escaped(); len(e) != 1 || e[0].PID != 5 {
			t.Fatalf("escaped %v, want pid 5", e)
		}
	})
}

// TestBindingCheckAfterExit: after the init of the container's own pid
// namespace exited, the exit path's look reads no host-wide /proc (the
// kernel left nothing of the namespace) but still judges the processes it
// tracks; in a joined namespace it scans as a forced poll does.
func TestBindingCheckAfterExit(t *testing.T) {
	for _, private := range []bool{true, false} {
		f := &fakeProc{procs: map[int]fakeP{
			1:  {start: 10, ns: ourNS, cg: "/k/c1"},
			7:  {start: 11, ppid: 1, ns: ourNS, cg: "/k/c1"},
			50: {start: 5, ns: hostNS, cg: "/system.slice"},
		}}
		p := fakePoller(f, ourNS, private)
		p.check(nsScanNow)
		// The init exits; the tracked child is found elsewhere (in a
		// joined namespace it may outlive the init).
		delete(f.procs, 1)
		f.procs[7] = fakeP{start: 11, ppid: 1, ns: ourNS, cg: "/other"}
		f.lists, f.nsReads = 0, 0
		got := targets(p.CheckAfterExit())
		if !slices.Equal(got, []string{"pid 7 in /other"}) {
			t.Errorf("private %v: escapes %q, want the tracked child", private, got)
		}
		if scanned := f.lists > 0; scanned == private {
			t.Errorf("private %v: host /proc listed %d times", private, f.lists)
		}
	}
}

// TestBindingExecInTransit: runc's exec init sits in the container's pid
// namespace, in the cgroup of the runc process outside it that made it,
// until runc moves it: no escape while it does, for at most transitMax;
// one whose parent is outside but which sits in another cgroup, or that
// stays past transitMax, is an escape.
func TestBindingExecInTransit(t *testing.T) {
	f := &fakeProc{procs: map[int]fakeP{
		1:   {start: 10, ns: ourNS, cg: "/k/c1"},
		500: {start: 20, ppid: 1, ns: hostNS, cg: "/"},         // runc exec, in the shim's cgroup
		8:   {start: 21, ppid: 500, ns: ourNS, cg: "/"},        // its exec init, in transit
		9:   {start: 22, ppid: 500, ns: ourNS, cg: "/"},        // another that never moves
		10:  {start: 23, ppid: 500, ns: ourNS, cg: "/k/other"}, // outside, not where its parent is
	}}
	p := fakePoller(f, ourNS, true)
	clock := time.Unix(1700000000, 0)
	p.now = func() time.Time { return clock }
	if got := targets(p.check(nsScanNow)); !slices.Equal(got, []string{"pid 10 in /k/other"}) {
		t.Fatalf("first poll: %q, want only pid 10", got)
	}
	clock = clock.Add(500 * time.Millisecond)
	p8 := f.procs[8]
	p8.cg = "/k/c1"
	f.procs[8] = p8
	if got := targets(p.check(nsScanNow)); len(got) != 0 {
		t.Fatalf("after runc moved pid 8: %q, want none", got)
	}
	clock = clock.Add(transitMax)
	if got := targets(p.check(nsScanNow)); !slices.Equal(got, []string{"pid 9 in /"}) {
		t.Fatalf("past transitMax: %q, want pid 9", got)
	}
}
