package hostrun

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"testing"
)

// fakeProc is a process table: pid -> (stat, real uid). reuse, when set,
// replaces a pid's stat after its status was read (a pid reused mid-walk).
type fakeProc struct {
	procs map[int]fakeEntry
	reuse map[int]procStat
	read  map[int]bool // status read
}

type fakeEntry struct {
	st  procStat
	uid uint32
}

func (f *fakeProc) Stat(pid int) (procStat, error) {
	if st, ok := f.reuse[pid]; ok && f.read[pid] {
		return st, nil
	}
	e, ok := f.procs[pid]
	if !ok {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, os.ErrNotExist)
	}
	return e.st, nil
}

func (f *fakeProc) RealUID(pid int) (uint32, error) {
	e, ok := f.procs[pid]
	if !ok {
		return 0, fmt.Errorf("/proc/%d/status: %w", pid, os.ErrNotExist)
	}
	if f.read == nil {
		f.read = map[int]bool{}
	}
	f.read[pid] = true
	return e.uid, nil
}

// chain builds self (pid 100) <- 90 <- 80 ... with the given real uids
// (index 0 is pid 90), then pid 1 (uid 0); start times grow down the chain
// and every process is in session sid.
func chain(sid int, uids ...uint32) *fakeProc {
	f := &fakeProc{procs: map[int]fakeEntry{1: {st: procStat{PPID: 0, Session: 1, Start: 1}}}}
	f.procs[100] = fakeEntry{st: procStat{PPID: 90, Session: sid, Start: 1000}}
	for i, uid := range uids {
		pid, ppid := 90-10*i, 80-10*i
		if i == len(uids)-1 {
			ppid = 1
		}
		f.procs[pid] = fakeEntry{st: procStat{PPID: ppid, Session: sid, Start: uint64(990 - 10*i)}, uid: uid}
	}
	return f
}

func TestInvokingUID(t *testing.T) {
	// sudo without a pty: gensee (100) <- sudo (90, real uid 1000) <- shell (80, 1000).
	sudo := chain(80, 1000, 1000)
	// use_pty: gensee <- sudo monitor (1000) <- sudo (1000) <- shell.
	pty := chain(90, 1000, 1000, 1000)
	// sudo su -c: gensee <- sh (0) <- su (0) <- sudo (1000).
	su := chain(80, 0, 0, 1000)
	// root's own shell: every ancestor root, session leader root.
	root := chain(70, 0, 0, 0)
	// root, but in a session led by 1000's shell (the caller's sudo was
	// killed: gensee reparented to pid 1).
	orphan := chain(80, 0)
	orphan.procs[80] = fakeEntry{st: procStat{PPID: 1, Session: 80, Start: 500}, uid: 1000}
	// reparented to pid 1 in a session a root shell leads (a caller who
	// su'd from root's shell killed their sudo): the leader is root but
	// not an ancestor.
	rootLeaderOff := chain(42)
	rootLeaderOff.procs[100] = fakeEntry{st: procStat{PPID: 1, Session: 42, Start: 1000}}
	rootLeaderOff.procs[42] = fakeEntry{st: procStat{PPID: 1, Session: 42, Start: 400}, uid: 0}
	// a root job whose shell exited: an ancestor of gensee, not gensee,
	// was left to pid 1 (a backgrounded CI run); its root leader is not
	// on the chain, and it is root's all the same.
	rootJob := chain(42, 0, 0)
	rootJob.procs[42] = fakeEntry{st: procStat{PPID: 1, Session: 42, Start: 400}, uid: 0}
	// the same, but the session leader is gone.
	gone := chain(42, 0)
	// the leader's pid was reused by a younger process.
	young := chain(42, 0)
	young.procs[42] = fakeEntry{st: procStat{PPID: 1, Session: 42, Start: 5000}, uid: 0}
	// the parent pid was reused between the stat and the status reads.
	reused := chain(80, 1000)
	reused.reuse = map[int]procStat{90: {PPID: 1, Session: 90, Start: 2000}}
	// the parent pid names a process younger than the child.
	younger := chain(80, 1000)
	younger.procs[90] = fakeEntry{st: procStat{PPID: 1, Session: 80, Start: 2000}, uid: 1000}
	// our own session (a service: setsid), all root.
	service := chain(100, 0)
	// a vanished ancestor.
	vanished := chain(80, 0, 0)
	delete(vanished.procs, 80)

	cases := []struct {
		name    string
		p       *fakeProc
		realUID int
		want    uint32
		err     bool
	}{
		{"not root", chain(80, 0), 1000, 1000, false},
		{"sudo", sudo, 0, 1000, false},
		{"sudo use_pty", pty, 0, 1000, false},
		{"sudo su", su, 0, 1000, false},
		{"root", root, 0, 0, false},
		{"service", service, 0, 0, false},
		{"reparented, session of the caller", orphan, 0, 1000, false},
		{"reparented, session leader gone", gone, 0, 0, true},
		{"session leader younger", young, 0, 0, true},
		{"pid reused mid-read", reused, 0, 0, true},
		{"parent younger than child", younger, 0, 0, true},
		{"left to pid 1, root session leader not an ancestor", rootLeaderOff, 0, 0, true},
		{"root job whose shell exited", rootJob, 0, 0, false},
		{"ancestor vanished", vanished, 0, 0, true},
	}
	for _, c := range cases {
		got, err := invokingUID(c.p, 100, c.realUID)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: got %d, %v; want %d (error %v)", c.name, got, err, c.want, c.err)
		}
		if err != nil && !errors.Is(err, errNoInvoker) {
			t.Errorf("%s: %v is not errNoInvoker", c.name, err)
		}
	}
}

func TestInvokingUserGID(t *testing.T) {
	lookup := func(uid string) (*user.User, error) {
		if uid == "1000" {
			return &user.User{Uid: "1000", Gid: "100", Username: "alice", HomeDir: "/home/alice"}, nil
		}
		return nil, errors.New("unknown")
	}
	got, err := invokingUser(chain(80, 1000), 100, 0, lookup)
	if want := (Identity{UID: 1000, GID: 100, Name: "alice", Home: "/home/alice"}); err != nil || got != want {
		t.Errorf("sudo: %+v, %v; want %+v", got, err, want)
	}
	got, err = invokingUser(chain(80, 4321), 100, 0, lookup)
	if want := (Identity{UID: 4321, GID: 4321, Home: "/"}); err != nil || got != want {
		t.Errorf("unknown uid: %+v, %v; want %+v", got, err, want)
	}
}

// TestInvokingUserIgnoresEnv: the real process, with SUDO_UID set, is
// still whoever the kernel says (the test's own ancestry, not 4242).
func TestInvokingUserIgnoresEnv(t *testing.T) {
	t.Setenv("SUDO_UID", "4242")
	t.Setenv("SUDO_GID", "4242")
	id, err := InvokingUser(nil)
	if err != nil {
		t.Skipf("this process's ancestry does not establish an invoking user: %v", err)
	}
	if id.UID == 4242 {
		t.Fatalf("InvokingUser took SUDO_UID: %+v", id)
	}
	if os.Getuid() != 0 && id.UID != uint32(os.Getuid()) {
		t.Fatalf("InvokingUser = %d, want the real uid %d", id.UID, os.Getuid())
	}
}

func TestProcfsSelf(t *testing.T) {
	var p procfs
	st, err := p.Stat(os.Getpid())
	if err != nil || st.PPID != os.Getppid() || st.Start == 0 {
		t.Fatalf("Stat(self) = %+v, %v (ppid %d)", st, err, os.Getppid())
	}
	uid, err := p.RealUID(os.Getpid())
	if err != nil || uid != uint32(os.Getuid()) {
		t.Fatalf("RealUID(self) = %d, %v", uid, err)
	}
	// A comm with spaces and parentheses does not shift the fields.
	st, err = parseStat([]byte("42 (a) b (c)) S 7 42 9 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n"))
	if err != nil || st != (procStat{PPID: 7, Session: 9, Start: 12345}) {
		t.Fatalf("parseStat = %+v, %v", st, err)
	}
	if _, err := parseStatusUID([]byte("Name:\tx\nUid:\tnope\n")); err == nil {
		t.Fatal("parseStatusUID accepted a bad Uid line")
	}
}

func TestRunAs(t *testing.T) {
	byName := func(s string) (*user.User, error) {
		switch s {
		case "alice":
			return &user.User{Uid: "1000", Gid: "100", Username: "alice", HomeDir: "/home/alice"}, nil
		case "root":
			return &user.User{Uid: "0", Gid: "0", Username: "root", HomeDir: "/root"}, nil
		}
		return nil, user.UnknownUserError(s)
	}
	byID := func(s string) (*user.User, error) {
		switch s {
		case "1000":
			return byName("alice")
		case "0":
			return byName("root")
		}
		return nil, user.UnknownUserIdError(0)
	}
	root := Identity{UID: 0, GID: 0, Name: "root", Home: "/root"}
	alice := Identity{UID: 1000, GID: 100, Name: "alice", Home: "/home/alice"}
	cases := []struct {
		name     string
		invoking Identity
		flag     string
		want     Identity
		field    string // refused when set
	}{
		{"sudo user", alice, "", alice, ""},
		{"root without --user", root, "", Identity{}, "user"},
		{"root names alice", root, "alice", alice, ""},
		{"root names a uid", root, "1000", alice, ""},
		{"root names an unknown uid", root, "4321", Identity{UID: 4321, GID: 4321, Home: "/"}, ""},
		{"root names root", root, "root", Identity{}, "--user"},
		{"root names 0", root, "0", Identity{}, "--user"},
		{"root names nobody known", root, "no-such-user", Identity{}, "--user"},
		{"sudo user names another", alice, "alice", Identity{}, "--user"},
	}
	for _, c := range cases {
		got, rf := RunAs(c.invoking, c.flag, byName, byID)
		switch {
		case c.field == "" && (rf != nil || got != c.want):
			t.Errorf("%s: got %+v, %v; want %+v", c.name, got, rf, c.want)
		case c.field != "" && (rf == nil || rf.Reason != ReasonUser || rf.Field != c.field):
			t.Errorf("%s: got %+v, %v; want refusal on %s", c.name, got, rf, c.field)
		}
	}
}
