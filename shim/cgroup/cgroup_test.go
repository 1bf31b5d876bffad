package cgroup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

func TestFindIn(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo string
		want            Hierarchy
		wantErr         error
	}{
		{
			name: "hybrid",
			mountinfo: `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
35 25 0:31 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
41 35 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 35 0:39 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`,
			want: Hierarchy{Mountpoint: "/sys/fs/cgroup/unified", Root: "/"},
		},
		{
			name:      "unified with optional fields and escapes",
			mountinfo: `29 23 0:26 /sub /my\040cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate` + "\n",
			want:      Hierarchy{Mountpoint: "/my cgroup", Root: "/sub"},
		},
		{
			name: "first of two",
			mountinfo: `41 35 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 41 0:38 /pod /cg rw,relatime - cgroup2 cgroup2 rw
`,
			want: Hierarchy{Mountpoint: "/sys/fs/cgroup/unified", Root: "/"},
		},
		{
			name:      "none",
			mountinfo: "42 35 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			wantErr:   ErrNoCgroup2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindIn(strings.NewReader(tc.mountinfo))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFindInMalformed: a table line the library cannot read is an error,
// never a skipped line (the kernel never prints one).
func TestFindInMalformed(t *testing.T) {
	if _, err := FindIn(strings.NewReader("41 35 0:38 / /sys/fs/cgroup/unified rw cgroup2\n")); err == nil || errors.Is(err, ErrNoCgroup2) {
		t.Fatalf("err = %v, want a read error", err)
	}
}

func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "9:name=systemd:/\n4:memory:/x\n0::/gensee/c1\n", want: "/gensee/c1"},
		{in: "0::/\n", want: "/"},
		{in: "0::/../other\n", err: "not below this cgroup namespace"},
		{in: "0::/a..b\n", want: "/a..b"},
		{in: "4:memory:/x\n", err: "no cgroup v2"},
	} {
		got, err := ParseProcCgroup(strings.NewReader(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestLevel(t *testing.T) {
	for p, want := range map[string]uint32{"/": 0, "/a": 1, "/a/b": 2, "/a/b/c/": 3} {
		if got := Level(p); got != want {
			t.Errorf("Level(%q) = %d, want %d", p, got, want)
		}
	}
}

func TestDir(t *testing.T) {
	h := Hierarchy{Mountpoint: "/sys/fs/cgroup/unified", Root: "/"}
	if d, err := h.Dir("/a/b"); err != nil || d != "/sys/fs/cgroup/unified/a/b" {
		t.Errorf("Dir = %q, %v", d, err)
	}
	for _, bad := range []string{"a/b", "/a/../../etc", "/a/./b", ""} {
		if d, err := h.Dir(bad); err == nil {
			t.Errorf("Dir(%q) = %q, want refusal", bad, d)
		}
	}
	sub := Hierarchy{Mountpoint: "/cg", Root: "/pod"}
	if d, err := sub.Dir("/pod/c1"); err != nil || d != "/cg/c1" {
		t.Errorf("Dir under root = %q, %v", d, err)
	}
	if _, err := sub.Dir("/other"); err == nil {
		t.Error("Dir outside root: want refusal")
	}
}

func TestParseStat(t *testing.T) {
	line := "4242 (a) b) (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100"
	st, err := ParseStat([]byte(line))
	if err != nil || st.PPID != 17 || st.Start != 987654 {
		t.Fatalf("ParseStat = %+v, %v; want ppid 17 start 987654", st, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 -5"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): want error", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseStat(b) })
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, root string
		want    bool
	}{{"/a", "/a", true}, {"/a/b", "/a", true}, {"/ab", "/a", false}, {"/", "/a", false}, {"/x", "/", true}} {
		if got := Within(c.p, c.root); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.p, c.root, got)
		}
	}
}

func TestSelfAlive(t *testing.T) {
	me, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !me.Alive() {
		t.Errorf("%s: not alive", me)
	}
	if (Proc{PID: me.PID, Start: me.Start + 1}).Alive() {
		t.Error("a pid with another start time is alive")
	}
}

// TestFindKeeps: Find reads the mount table once and gives the same
// hierarchy again while its mountpoint resolves to the mount it read (by
// unique mount id); a table whose mount is not the one the mountpoint
// resolves to is never kept.
func TestFindKeeps(t *testing.T) {
	dir := t.TempDir()
	id := mountID(dir, unix.STATX_MNT_ID)
	if id == 0 || uniqueMountID(dir) == 0 {
		t.Fatalf("statx gives no mount ids for %s (kernel before 6.8?)", dir)
	}
	reads := 0
	readID := int(id)
	old := getMounts
	getMounts = func(f mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
		reads++
		return []*mountinfo.Info{{ID: readID, Mountpoint: dir, Root: "/", FSType: "cgroup2"}}, nil
	}
	found.h, found.unique = Hierarchy{}, 0
	t.Cleanup(func() { getMounts = old; found.h, found.unique = Hierarchy{}, 0 })

	want := Hierarchy{Mountpoint: dir, Root: "/"}
	for i := range 3 {
		if h, err := Find(); err != nil || h != want {
			t.Fatalf("Find #%d = %+v, %v; want %+v", i, h, err, want)
		}
	}
	if reads != 1 {
		t.Fatalf("three Finds read the mount table %d times, want once", reads)
	}
	if found.unique == uint64(readID) {
		t.Fatalf("kept the reusable mount id %d, want the unique one", readID)
	}
	// A kept id that no longer names the mountpoint's mount: read again.
	found.unique++
	Find()
	if reads != 2 {
		t.Fatalf("a kept mount the mountpoint no longer resolves to: %d reads, want 2", reads)
	}
	// The table names another mount than the one the mountpoint resolves
	// to: nothing is kept, every Find reads.
	readID = int(id) + 1000
	found.h, found.unique = Hierarchy{}, 0
	Find()
	Find()
	if reads != 4 {
		t.Fatalf("with a mount id the mountpoint does not resolve to, %d reads, want 4", reads)
	}
}

// TestWaitEvent: the wait ends once cgroup.events holds the line, and past
// its context's deadline with the context's error.
func TestWaitEvent(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "cgroup.events")
	if err := os.WriteFile(events, []byte("populated 1\nfrozen 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		os.WriteFile(events+".new", []byte("populated 0\nfrozen 0\n"), 0o644)
		os.Rename(events+".new", events)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := waitEvent(ctx, dir, "populated 0"); err != nil {
		t.Fatalf("the line came: %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := waitEvent(ctx, dir, "frozen 1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the line never came: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the wait outlasted its deadline by %v", took)
	}
}
