package hostrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/gate"
)

// privateTmp are the directories the command gets a private, discarded
// tmpfs on (when they exist on the host).
var privateTmp = []string{"/tmp", "/var/tmp"}

// stageMounts, in the wrapper's own mount namespace:
//
//  1. makes every mount private (nothing propagates back to the host);
//  2. mounts the overlay at the workspace: lower = the real workspace,
//     upper/work = the operation's, metacopy=off,redirect_dir=nofollow so
//     the upper dir the gate reads holds whole files; nosuid, nodev;
//  3. clones that mount (detached), so it can be attached again above
//     whatever the next steps put over its path;
//  4. makes the whole tree read-only (mount_setattr AT_RECURSIVE): the host's
//     files, its home directories, cgroupfs, the state dir;
//  5. mounts private tmpfs at /tmp and /var/tmp (discarded with the
//     namespace);
//  6. attaches the staged workspace clone at its path: the one writable
//     place the gate sees.
func stageMounts(s wrapperSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	opts := gate.HardenOverlayOptions([]string{"lowerdir=" + s.Workspace, "upperdir=" + s.Upper, "workdir=" + s.Work})
	if err := unix.Mount("overlay", s.Workspace, "overlay", unix.MS_NOSUID|unix.MS_NODEV, strings.Join(opts, ",")); err != nil {
		return fmt.Errorf("mount the staged workspace (overlay, lowerdir %s): %w; the workspace's file system cannot be an overlay lower layer: move the workspace to a local disk file system (ext4, xfs, btrfs, tmpfs)", s.Workspace, err)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, s.Workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the staged workspace mount: %w", err)
	}
	defer unix.Close(tree)
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, ro); err != nil {
		return fmt.Errorf("make every mount read-only: %w", err)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, rw); err != nil {
		return fmt.Errorf("keep the staged workspace writable: %w", err)
	}
	for _, d := range privateTmp {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=25%"); err != nil {
			return fmt.Errorf("mount a private tmpfs at %s: %w", d, err)
		}
	}
	if under(s.Workspace) {
		// The workspace lies in a private tmpfs now: give it a mountpoint.
		if err := os.MkdirAll(s.Workspace, 0o755); err != nil {
			return fmt.Errorf("make the workspace mountpoint in the private tmpfs: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, s.Workspace, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the staged workspace at %s: %w", s.Workspace, err)
	}
	return nil
}

// under reports whether p lies inside one of the private tmpfs mounts.
func under(p string) bool {
	for _, d := range privateTmp {
		if rel, err := filepath.Rel(d, p); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}

// dropPrivileges makes this thread (the one that execs) the invoking user
// with no capability it could ever regain: no_new_privs (setuid bits and
// file capabilities grant nothing), the bounding set emptied, the root
// securebits locked (uid 0 gains nothing at exec), supplementary groups
// reduced to the user's primary group, then uid/gid, then every capability
// set cleared.
func dropPrivileges(uid, gid uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	// <linux/securebits.h>: NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP_LOCKED,
	// KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, NO_CAP_AMBIENT_RAISE_LOCKED.
	const secure = 1<<0 | 1<<1 | 1<<3 | 1<<5 | 1<<6 | 1<<7
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil {
		return fmt.Errorf("lock securebits: %w", err)
	}
	if err := syscall.Setgroups([]int{int(gid)}); err != nil {
		return fmt.Errorf("set groups: %w", err)
	}
	if err := syscall.Setresgid(int(gid), int(gid), int(gid)); err != nil {
		return fmt.Errorf("set gid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(int(uid), int(uid), int(uid)); err != nil {
		return fmt.Errorf("set uid %d: %w", uid, err)
	}
	// A uid-0 user keeps its sets through setresuid (NO_SETUID_FIXUP is not
	// set, but 0 -> 0 is no transition): clear them explicitly.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}

// execveat executes fd itself (AT_EMPTY_PATH): the file that was hashed,
// whatever its path names now.
func execveat(fd int, argv, envv []string) error {
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	av, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	ev, err := syscall.SlicePtrFromStrings(envv)
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&av[0])), uintptr(unsafe.Pointer(&ev[0])), unix.AT_EMPTY_PATH, 0)
	return errno
}
