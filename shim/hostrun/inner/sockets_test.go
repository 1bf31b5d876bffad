package inner

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// procEntry builds a /proc of processes: each with ns/net, ns/mnt, root,
// cwd and fd links, and the net/unix of its namespace.
type procEntry struct {
	net, mnt, root, cwd string
	fds                 []string
	unix                string // net/unix body after the header
}

func writeProcTree(t *testing.T, procs map[string]procEntry) string {
	t.Helper()
	root := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(root, pid)
		for _, sub := range []string{"ns", "net", "fd"} {
			mustOK(t, os.MkdirAll(filepath.Join(d, sub), 0o755))
		}
		mustOK(t, os.Symlink(p.net, filepath.Join(d, "ns", "net")))
		mustOK(t, os.Symlink(p.mnt, filepath.Join(d, "ns", "mnt")))
		mustOK(t, os.Symlink(p.root, filepath.Join(d, "root")))
		mustOK(t, os.Symlink(p.cwd, filepath.Join(d, "cwd")))
		for i, l := range p.fds {
			mustOK(t, os.Symlink(l, filepath.Join(d, "fd", string(rune('0'+i)))))
		}
		mustOK(t, os.WriteFile(filepath.Join(d, "net", "unix"), []byte("Num       RefCount Protocol Flags    Type St Inode Path\n"+p.unix), 0o644))
	}
	return root
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestHostSocketsRelative: absolute paths are listed as bound; a relative
// one is joined to the cwd of a process of its network namespace that
// holds the socket, in the host's mount namespace with the host's root;
// holders in another mount namespace or a chroot, and sockets nobody in
// the host's view holds, resolve to nothing.
func TestHostSocketsRelative(t *testing.T) {
	const host, other = "mnt:[1]", "mnt:[2]"
	line := func(ino, path string) string {
		return "0000000000000000: 00000002 00000000 00010000 0001 01 " + ino + " " + path + "\n"
	}
	procs := map[string]procEntry{
		"1": {net: "net:[10]", mnt: host, root: "/", cwd: "/", fds: []string{"/dev/null"},
			unix: line("100", "/srv/abs.sock") + line("101", "rel.sock") + line("102", "sub/held-elsewhere.sock") +
				line("103", "orphan.sock") + line("104", "chrooted.sock") + line("105", "@abstract")},
		"20": {net: "net:[10]", mnt: host, root: "/", cwd: "/home/u/proj", fds: []string{"pipe:[5]", "socket:[101]"}},
		"21": {net: "net:[10]", mnt: other, root: "/", cwd: "/elsewhere", fds: []string{"socket:[102]"}},
		"22": {net: "net:[10]", mnt: host, root: "/", cwd: "/var/lib/x", fds: []string{"socket:[102]"}},
		"23": {net: "net:[10]", mnt: host, root: "/srv/chroot", cwd: "/srv/chroot/tmp", fds: []string{"socket:[104]"}},
		"30": {net: "net:[11]", mnt: host, root: "/", cwd: "/opt", fds: []string{"socket:[200]"},
			unix: line("200", "ns2.sock")},
		"31": {net: "net:[10]", mnt: host, root: "/", cwd: "/opt", fds: []string{"socket:[200]"}},
	}
	root := writeProcTree(t, procs)
	got := hostSockets(root, host)
	want := []string{"/home/u/proj/rel.sock", "/opt/ns2.sock", "/srv/abs.sock", "/var/lib/x/sub/held-elsewhere.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("hostSockets =\n%q\nwant\n%q", got, want)
	}
	if got := hostSockets(root, ""); !slices.Equal(got, []string{"/srv/abs.sock"}) {
		t.Errorf("without the host's mount namespace: %q", got)
	}
}

func TestSocketInode(t *testing.T) {
	for l, want := range map[string]uint64{"socket:[123]": 123, "socket:[]": 0, "pipe:[4]": 0, "socket:[12": 0, "/dev/null": 0} {
		if got, ok := socketInode(l); got != want || ok != (want != 0) {
			t.Errorf("socketInode(%q) = %d %v", l, got, ok)
		}
	}
}

// BenchmarkHostSockets reads this host's /proc as a run's start does, with
// the fd scan a relative-bound socket costs: this process binds one, so
// the scan reads the fds of every process of the host's namespaces until
// it finds this one.
func BenchmarkHostSockets(b *testing.B) {
	mnt, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		b.Skip(err)
	}
	b.Chdir(b.TempDir())
	l, err := net.Listen("unix", "rel.sock")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	want := filepath.Join(mustCwd(b), "rel.sock")
	for b.Loop() {
		if got := hostSockets("/proc", mnt); !slices.Contains(got, want) {
			b.Fatalf("%s not found in %q", want, got)
		}
	}
}

func mustCwd(b *testing.B) string {
	d, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
