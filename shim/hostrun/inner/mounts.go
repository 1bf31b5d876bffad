package inner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// PrivateTmp are the directories the command gets a private, discarded
// tmpfs on (when they exist on the host).
var PrivateTmp = []string{"/tmp", "/var/tmp"}

// maskFile is the empty, mode-0 file bound over each host socket the
// command must not reach (in the run's /run tmpfs).
const maskFile = "/run/.gensee-masked"

// view is the command's file system as openView and finish build it.
type view struct {
	tree     *os.File // the staged workspace's mount (fsmount's fd)
	self     string   // the gensee binary, for the stage's exec
	writable []string // the trees Landlock lets the command write, in the stage's view
	tmpfs    []string // the private tmpfs mounted (/tmp, /var/tmp, /dev/shm)
	masked   []string // what the manifest lists as masked
	volatile bool     // the staged workspace's overlay took "volatile"

	ws    *os.File        // the workspace directory checked (openWorkspace), until finish
	socks <-chan []string // hostSockets' answer, read through the host's procfs
}

// openView begins the command's view in the wrapper's own mount namespace
// (still host root; nothing of the command runs yet), enough for the stage
// to start while finish builds the rest:
//
//  1. every mount private (nothing propagates back to the host);
//  2. the host's procfs kept as an fd, through which the bound pathname
//     sockets of every network namespace are read (hostSockets, beside
//     the steps below), and a procfs of the run's pid namespace mounted
//     on /proc: the stage's id maps are written through it (read-only
//     with the rest of the tree in finish, after they are written);
//  3. the workspace opened once (before the run's procfs covers /proc),
//     O_PATH|O_NOFOLLOW, and refused unless it is the directory the parent
//     checked (device and inode); the staged
//     workspace, an overlay (lower = that fd; upper/work = the
//     operation's; metacopy=off, redirect_dir=nofollow; nosuid, nodev),
//     made detached with the new mount API.
func openView(s Spec) (_ *view, retErr error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	hostProc, err := os.OpenFile("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the host's procfs: %w", err)
	}
	socks := make(chan []string, 1)
	go func() {
		found := hostSockets("/proc/self/fd/"+strconv.Itoa(int(hostProc.Fd())), s.HostMountNS)
		hostProc.Close() // before finish goes on: nothing later reaches the host's procfs
		socks <- found
	}()
	// The workspace is opened as the host names it, before the run's
	// procfs covers /proc.
	ws, err := openWorkspace(s)
	if err != nil {
		return nil, err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		ws.Close()
		return nil, fmt.Errorf("mount the run's procfs: %w", err)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("open the gensee binary: %w", err)
	}
	tree, volatile, err := overlayTree(s, ws)
	if err != nil {
		ws.Close()
		return nil, err
	}
	return &view{tree: tree, self: "/proc/self/fd/" + strconv.Itoa(int(self.Fd())), ws: ws, socks: socks, volatile: volatile}, nil
}

// finish builds the rest of the command's view, once the stage (which
// shares the mount namespace) has started:
//
//  4. clones of the operator's allowed runtime files, taken before /run
//     is covered; a /dev holding only null, zero, full, random, urandom
//     and tty; an empty /run (and /var/run when it is not a link to /run)
//     with the allowed runtime files put back; the run's own cgroup2 view
//     (cgroupView); an empty read-only tmpfs over every other mount of a
//     kernel file system that exposes host processes, IPC or kernel
//     control (kernelFS: a chroot's proc, a second devpts, bpf, debugfs,
//     ...); the mask file bound over every other socket;
//  5. the whole tree read-only (mount_setattr AT_RECURSIVE), the run's
//     procfs with it;
//  6. private tmpfs at /tmp, /var/tmp and /dev/shm, discarded with the
//     namespace;
//  7. the staged workspace attached on the directory opened in 3 (or, when
//     it lies in a private tmpfs, on a directory made there), and the
//     sockets inside the workspace masked on top of it.
func (v *view) finish(s Spec) error {
	defer v.ws.Close()
	rt, err := cloneRuntimeFiles(s.RuntimeFiles)
	if err != nil {
		return err
	}
	if err := v.maskHost(rt); err != nil {
		return err
	}
	outside, inside := splitUnder(<-v.socks, s.Workspace)
	masked, err := maskSockets(outside)
	if err != nil {
		return err
	}
	if err := readOnlyTree(); err != nil {
		return fmt.Errorf("make every mount read-only: %w", err)
	}
	if err := v.privateMounts(); err != nil {
		return err
	}
	v.masked = append(v.masked, "/proc (the run's own pid namespace: no host process is visible)")
	if err := attachTree(v.tree, v.ws, s.Workspace); err != nil {
		return err
	}
	in, err := maskSockets(inside)
	if err != nil {
		return err
	}
	// Only what was masked: a candidate that names no socket now (renamed,
	// or bound in another mount namespace) was not.
	if masked = append(masked, in...); len(masked) > 0 {
		v.masked = append(v.masked, fmt.Sprintf("%d bound pathname socket(s) outside /run, each covered with the mask file: %s", len(masked), strings.Join(masked, ", ")))
	}
	v.writable = append([]string{"/proc/self/fd/" + strconv.Itoa(fdTree)}, v.tmpfs...)
	return nil
}

// readOnlyTree makes every mount of the view read-only, at once
// (mount_setattr AT_RECURSIVE: all or none). The kernel refuses it with
// EBUSY while a mount of the tree has a writer, a file open for writing
// on it. The view's own writes are closed by then, but a file's last
// release can lag its close (the kernel hands it to a worker when the
// closing task is exiting); one CI run under load met EBUSY here once,
// with the writer not pinned down. The call is retried for a bounded time
// (a refused one changes nothing) and then fails: the run is refused,
// never started writable.
func readOnlyTree() error {
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	deadline := time.Now().Add(readOnlyRetry)
	for {
		err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, ro)
		if err != unix.EBUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// readOnlyRetry bounds readOnlyTree's retries of a busy tree.
const readOnlyRetry = 200 * time.Millisecond

// maskHost masks what of the host the view must not show (step 4):
// /dev down to its harmless nodes, /run and /var/run emptied (the allowed
// runtime files rt put back), the cgroup tree, and the kernel's own file
// systems.
func (v *view) maskHost(rt []runtimeFile) error {
	if err := makeDev(); err != nil {
		return err
	}
	v.masked = append(v.masked, "/dev (only null, zero, full, random, urandom, tty; /dev/shm private; no /dev/mqueue, /dev/pts)")
	n, err := makeRun(rt)
	if err != nil {
		return err
	}
	v.masked = append(v.masked, fmt.Sprintf("/run and /var/run (empty tmpfs; %d allowed runtime file(s) put back)", n))
	cg, err := cgroupView()
	if err != nil {
		return err
	}
	if cg != "" {
		v.masked = append(v.masked, cg)
	}
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return fmt.Errorf("read the mount table: %w", err)
	}
	km, err := maskKernelMounts(kernelMounts(ms, covered))
	if err != nil {
		return err
	}
	v.masked = append(v.masked, km...)
	return nil
}

// privateMounts mounts the run's own (step 6): private tmpfs at /tmp,
// /var/tmp and /dev/shm, discarded with the namespace.
func (v *view) privateMounts() error {
	for _, d := range append(append([]string{}, PrivateTmp...), "/dev/shm") {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=25%"); err != nil {
			return fmt.Errorf("mount a private tmpfs at %s: %w", d, err)
		}
		v.tmpfs = append(v.tmpfs, d)
		v.masked = append(v.masked, d+" (private tmpfs, discarded at exit)")
	}
	return nil
}

// openWorkspace opens the workspace once and refuses it unless it is the
// directory the parent checked.
func openWorkspace(s Spec) (*os.File, error) {
	fd, err := unix.Open(s.Workspace, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the workspace %s: %w", s.Workspace, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat the workspace %s: %w", s.Workspace, err)
	}
	if st.Dev != s.WorkspaceDev || st.Ino != s.WorkspaceIno {
		unix.Close(fd)
		return nil, fmt.Errorf("the workspace %s is no longer the directory that was checked (it was replaced or moved): run again", s.Workspace)
	}
	return os.NewFile(uintptr(fd), s.Workspace), nil
}

// overlayTree makes the staged workspace as a detached mount. A kernel
// that refuses the "volatile" flag (before Linux 5.10) gets the overlay
// without it; volatile says which it got.
func overlayTree(s Spec, ws *os.File) (tree *os.File, volatile bool, err error) {
	opts := s.OverlayOptions
	volatile = slices.Contains(opts, OverlayVolatile)
	tree, err = mountOverlay(s, ws, opts)
	if err != nil && volatile {
		volatile = false
		tree, err = mountOverlay(s, ws, slices.DeleteFunc(slices.Clone(opts), func(o string) bool { return o == OverlayVolatile }))
	}
	return tree, volatile, err
}

// mountOverlay makes the overlay of the workspace (lower) and s's upper
// and work dirs with opts, each "key=value" or a flag.
func mountOverlay(s Spec, ws *os.File, opts []string) (*os.File, error) {
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open an overlay file system: %w", err)
	}
	defer unix.Close(fs)
	lower := "/proc/self/fd/" + strconv.Itoa(int(ws.Fd()))
	for _, o := range append([]string{"lowerdir=" + lower, "upperdir=" + s.Upper, "workdir=" + s.Work}, opts...) {
		k, v, valued := strings.Cut(o, "=")
		var err error
		if valued {
			err = unix.FsconfigSetString(fs, k, v)
		} else {
			err = unix.FsconfigSetFlag(fs, k)
		}
		if err != nil {
			return nil, fmt.Errorf("overlay option %s: %w", k, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return nil, fmt.Errorf("mount the staged workspace (overlay, lowerdir %s): %w; the workspace's file system cannot be an overlay lower layer: move the workspace to a local disk file system (ext4, xfs, btrfs, tmpfs)", s.Workspace, err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("mount the staged workspace: %w", err)
	}
	return os.NewFile(uintptr(mfd), "staged-workspace"), nil
}

// attachTree attaches the staged workspace on the workspace directory ws
// (the one opened and checked), or on a directory made in a private tmpfs
// that now covers it.
func attachTree(tree, ws *os.File, path string) error {
	if under(path) {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return fmt.Errorf("make the workspace mountpoint in the private tmpfs: %w", err)
		}
		if err := unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attach the staged workspace at %s: %w", path, err)
		}
		return nil
	}
	if err := unix.MoveMount(int(tree.Fd()), "", int(ws.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the staged workspace at %s: %w", path, err)
	}
	return nil
}

// under reports whether p lies inside one of the private tmpfs mounts.
func under(p string) bool {
	for _, d := range PrivateTmp {
		if p != d && within(p, d) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or lies below it. Both are cleaned
// first: a socket's path in /proc/net/unix is as its binder wrote it
// ("/tmp/../home/u/agent.sock" lies outside /tmp).
func within(p, dir string) bool { return fsafe.Within(filepath.Clean(p), filepath.Clean(dir)) }

// devices are the command's device nodes: major, minor.
var devices = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

// makeDev mounts the command's /dev: a tmpfs holding only the device nodes
// a build needs, the usual links into /proc, and an empty shm directory
// (a private tmpfs goes on it).
func makeDev() error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("mount the run's /dev: %w", err)
	}
	for _, d := range devices {
		p := "/dev/" + d.name
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("make %s: %w", p, err)
		}
		if err := unix.Chmod(p, 0o666); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	links := [][2]string{{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}}
	for _, l := range links {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return fmt.Errorf("link %s: %w", l[1], err)
		}
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err != nil {
		return fmt.Errorf("make /dev/shm: %w", err)
	}
	return nil
}

// runtimeFile is a clone of an allowed runtime file, taken before /run is
// covered.
type runtimeFile struct {
	path string // below /run
	fd   int
	dir  bool
}

// cloneRuntimeFiles clones each allowed runtime file below /run or
// /var/run (elsewhere nothing covers it) that exists, and the target of
// /etc/resolv.conf when that is a link into /run (the resolver's config,
// read-only data).
func cloneRuntimeFiles(paths []string) ([]runtimeFile, error) {
	if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && t != "/etc/resolv.conf" {
		paths = append(paths, t)
	}
	varRunLink := false
	if t, err := os.Readlink("/var/run"); err == nil && (t == "/run" || t == "../run") {
		varRunLink = true
	}
	var out []runtimeFile
	seen := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if varRunLink && within(p, "/var/run") {
			p = "/run" + strings.TrimPrefix(p, "/var/run")
		}
		if !within(p, "/run") && !within(p, "/var/run") || p == "/run" || p == "/var/run" || seen[p] {
			continue
		}
		seen[p] = true
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			continue // absent, or a link: nothing to put back
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return nil, fmt.Errorf("clone the allowed runtime file %s: %w", p, err)
		}
		out = append(out, runtimeFile{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return out, nil
}

// makeRun covers /run (and /var/run when it is a directory of its own)
// with an empty tmpfs, puts the runtime files back read-only and creates
// the mask file. It returns how many files were put back.
func makeRun(rt []runtimeFile) (int, error) {
	dirs := []string{"/run"}
	if fi, err := os.Lstat("/var/run"); err == nil && fi.IsDir() {
		dirs = append(dirs, "/var/run")
	}
	for _, d := range dirs {
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
			return 0, fmt.Errorf("cover %s: %w", d, err)
		}
	}
	f, err := os.OpenFile(maskFile, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("make the mask file: %w", err)
	}
	f.Close()
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, r := range rt {
		if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
			return 0, fmt.Errorf("put back %s: %w", r.path, err)
		}
		if r.dir {
			err = os.Mkdir(r.path, 0o755)
		} else {
			var mp *os.File
			if mp, err = os.OpenFile(r.path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0); err == nil {
				mp.Close()
			}
		}
		if err != nil {
			return 0, fmt.Errorf("put back %s: %w", r.path, err)
		}
		if err := unix.MountSetattr(r.fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, ro); err != nil {
			return 0, fmt.Errorf("put back %s read-only: %w", r.path, err)
		}
		if err := unix.MoveMount(r.fd, "", unix.AT_FDCWD, r.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return 0, fmt.Errorf("put back %s: %w", r.path, err)
		}
		unix.Close(r.fd)
	}
	return len(rt), nil
}

// covered are the trees a socket needs no mask of its own in: the run
// covers them whole.
var covered = []string{"/run", "/var/run", "/tmp", "/var/tmp", "/dev", "/proc"}

// splitUnder drops the sockets of covered trees and splits the rest into
// those outside and inside the workspace.
func splitUnder(socks []string, ws string) (outside, inside []string) {
next:
	for _, p := range socks {
		for _, c := range covered {
			if within(p, c) {
				continue next
			}
		}
		if within(p, ws) {
			inside = append(inside, p)
		} else {
			outside = append(outside, p)
		}
	}
	return outside, inside
}

// maskSockets binds a read-only clone of the mask file over each path that
// is a socket now, and returns those. A socket that cannot be masked fails
// the run.
func maskSockets(paths []string) ([]string, error) {
	var masked []string
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, maskFile, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return masked, fmt.Errorf("clone the mask file: %w", err)
		}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, ro)
		if err == nil {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return masked, fmt.Errorf("mask the host socket %s: %w", p, err)
		}
		if err == nil {
			masked = append(masked, p)
		}
	}
	return masked, nil
}
