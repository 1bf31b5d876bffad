package inner

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/sandbox"
)

// stageSpec is what the wrapper tells the stage.
type stageSpec struct {
	UID        uint32   `json:"uid"`
	GID        uint32   `json:"gid"`
	Args       []string `json:"args"`
	Env        []string `json:"env"`
	InterpArgs []string `json:"interp_args,omitempty"`
	// Writable are the directories Landlock lets the command write below,
	// as the stage sees them (the staged workspace as /proc/self/fd/N).
	Writable []string `json:"writable"`
}

// Applied is what the stage applied before its exec, for the
// manifest: only what the kernel accepted.
type Applied struct {
	Landlock *sandbox.Applied `json:"landlock,omitempty"`
	Seccomp  []string         `json:"seccomp"`
}

// deviceFiles are the device nodes of the command's /dev that Landlock
// lets it write (and ioctl).
var deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// StageMain is the stage: in the run's user namespace (only the invoking
// uid and gid mapped), on one locked thread, it drops every privilege,
// restricts itself with Landlock, builds its seccomp filter, waits for the
// go on its spec pipe, then installs the filter and executes the sealed
// copy of the command. It returns only on failure, or when the go never
// comes (the run was given up: nothing is reported, the wrapper does).
func StageMain() int {
	runtime.LockOSThread()
	st := os.NewFile(fdStatus, "status")
	report := reporter(st)
	fail := func(step, reason string, err error) int {
		report(Status{Step: step, Reason: reason, Error: err.Error()})
		return wrapperSetupFailed
	}
	var s stageSpec
	specR := os.NewFile(fdStageSpec, "stage-spec")
	dec := json.NewDecoder(specR)
	if err := dec.Decode(&s); err != nil {
		return fail("stage", "", fmt.Errorf("read the stage's spec: %w", err))
	}
	if s.UID == 0 {
		return fail("credentials", ReasonUser, fmt.Errorf("uid 0 never runs a host command"))
	}
	if err := dropPrivileges(s.UID, s.GID); err != nil {
		return fail("credentials", ReasonUser, err)
	}
	ll := sandbox.Landlock{ReadOnly: []string{"/"}, Writable: s.Writable, WritableFiles: deviceFiles,
		ScopeAbstractUnix: true, ScopeSignal: true}
	applied := Applied{Seccomp: sandbox.FilterSummary()}
	if sandbox.LandlockABI() > 0 {
		a, err := ll.Restrict()
		if err != nil {
			return fail("landlock", "", fmt.Errorf("apply Landlock: %w", err))
		}
		applied.Landlock = &a
	}
	if err := unix.Fchdir(fdTree); err != nil {
		return fail("exec", ReasonWorkspace, fmt.Errorf("enter the staged workspace: %w", err))
	}
	// Every inherited fd but stdio closes at the exec (the status fd too:
	// its EOF tells the parent the exec happened); a script's own fd stays
	// open for its interpreter.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("exec", "", fmt.Errorf("mark inherited fds close-on-exec: %w", err))
	}
	fd, argv := fdExe, s.Args
	if s.InterpArgs != nil {
		if _, err := unix.FcntlInt(fdExe, unix.F_SETFD, 0); err != nil {
			return fail("exec", "", fmt.Errorf("keep the script's fd open: %w", err))
		}
		fd = fdInterp
		argv = append(append(append([]string{}, s.InterpArgs...), "/dev/fd/"+strconv.Itoa(fdExe)), s.Args[1:]...)
	}
	prog, err := sandbox.HostFilter()
	if err != nil {
		return fail("seccomp", "", err)
	}
	if !awaitGo(io.MultiReader(dec.Buffered(), specR)) {
		return wrapperSetupFailed // the run was given up before its go
	}
	report(Status{Applied: &applied})
	if err := sandbox.InstallFilter(prog); err != nil {
		return fail("seccomp", "", fmt.Errorf("install the seccomp filter: %w", err))
	}
	err = execveat(fd, argv, s.Env)
	return fail("exec", ReasonCommand, fmt.Errorf("execute %s as uid %d: %w", s.Args[0], s.UID, err))
}

// dropPrivileges makes this thread (the one that execs) the invoking user
// with no capability it could ever regain: the bounding set emptied, the
// root securebits locked (uid 0 gains nothing at exec), no_new_privs
// (setuid bits and file capabilities grant nothing), supplementary groups
// reduced to the user's primary group, then gid and uid, then every
// capability set cleared. In the stage it runs as the user namespace's
// unmapped owner with every capability of that namespace only.
func dropPrivileges(uid, gid uint32) error {
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
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
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
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %w", err)
	}
	return nil
}

// execveat executes fd itself (AT_EMPTY_PATH): the sealed copy that was
// hashed, whatever any path names now.
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
