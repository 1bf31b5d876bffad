// Package launcher is the program containerd runs as the gensee runtime
// (containerd-shim-gensee-v2). containerd runs that binary three ways for
// every task: `start`, which spawns the long-lived shim; the long-lived
// shim itself; and `delete` after the shim has ended, which containerd's
// task Delete waits for. The full shim (FullShim, beside this binary) links
// containerd's shim packages, ttrpc, protobuf and grpc: each exec of it
// costs about 11 ms of wall time and 20 ms of CPU on the 2-vCPU VMs before
// it does anything (package initialisation, the runtime's start-up, page
// faults, teardown). This program links the standard library, x/sys,
// mountinfo, userns and the records package only, and answers the two
// calls that need none of the rest: `start` (start.go: containerd's start
// action and the runc manager's Start, spawning the full shim as the
// long-lived shim) for the calls containerd makes, and `delete` for a
// task its shim cleaned up, where the full shim's answer is known without
// it: runc keeps no state for the container, nothing is mounted under its
// rootfs, its exit is recorded in the bundle and its operation is marked
// cleaned (or it never had one). Every other call, and every start or
// delete that is not those cases, it hands to the full shim by exec, with
// the same arguments, environment and stdin.
package launcher

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
)

// FullShim is the full shim's binary, installed beside this one.
const FullShim = "gensee-shim"

// runcRoot is the runc manager's default runc root (containerd's
// process.RuncRoot; TestFrontMatchesContainerd pins it).
const runcRoot = "/run/containerd/runc"

// Main answers the call or hands it to the full shim; it does not return.
func Main() {
	args := os.Args[1:]
	if st, ok := cleanDelete(args); ok {
		if _, err := os.Stdout.Write(deleteResponse(st)); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Opened and checked once (the file, every directory above it), then
	// run from this fd only: nobody but root or its owner can put another
	// program in its place, and not even they between the check and the
	// exec.
	full, err := fsafe.OpenTrustedSibling(FullShim)
	if err != nil {
		fail(fmt.Errorf("run the full shim: %w (install %s beside %s, as `make build` lays them out)", err, FullShim, filepath.Base(os.Args[0])))
	}
	var stdin []byte
	if ns, id, ok := startArgs(args); ok {
		in, err := readBootstrap(os.Stdin)
		if err != nil {
			fail(fmt.Errorf("failed to read stdin: %w", err))
		}
		res, ok, err := startShim(ns, id, in, full)
		if err != nil {
			fail(err)
		}
		if ok {
			if _, err := os.Stdout.Write(res); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
		stdin = in
	}
	fail(execFull(full, stdin))
}

// fail reports err as containerd's shim reports a failed action: on
// stderr, under the runtime's name, exit status 1.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "io.containerd.gensee.v2: %s", err)
	os.Exit(1)
}

// execFull runs the full shim (opened and checked) in this process with
// the same arguments and environment, and stdin (read already) as its
// standard input again when it is not nil. It returns only on failure.
// It execs /proc/self/fd/N, the file that was checked, through the Go
// runtime's exec (which gives the program the RLIMIT_NOFILE this process
// started with: a raw execveat would hand on the raised one, to runc and
// the containers); its comm is then N, for these short-lived calls only
// (the long-lived shim is named by startShim's link).
func execFull(full *os.File, stdin []byte) error {
	if stdin != nil {
		f, err := stdinFile(stdin)
		if err != nil {
			return fmt.Errorf("hand on stdin: %w", err)
		}
		err = unix.Dup3(int(f.Fd()), 0, 0)
		runtime.KeepAlive(f)
		if err != nil {
			return fmt.Errorf("hand on stdin: %w", err)
		}
	}
	err := unix.Exec("/proc/self/fd/"+strconv.Itoa(int(full.Fd())), os.Args, os.Environ())
	return fmt.Errorf("run the full shim %s: %w", full.Name(), err)
}

// stdinFile is a close-on-exec file that reads back b, then EOF: a memfd,
// or where that is refused a pipe holding b (at most its capacity).
func stdinFile(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("bootstrap", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
	if err != nil { // before Linux 6.3
		fd, err = unix.MemfdCreate("bootstrap", unix.MFD_CLOEXEC)
	}
	if err == nil {
		f := os.NewFile(uintptr(fd), "bootstrap")
		if _, err := f.Write(b); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if n, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0); err != nil || n < len(b) {
		if n, err = unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, len(b)); err != nil || n < len(b) {
			r.Close()
			return nil, fmt.Errorf("%d bytes do not fit a pipe", len(b))
		}
	}
	if _, err := w.Write(b); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// shimFlags are containerd's shim flags (pkg/shim) and the action.
type shimFlags struct {
	debug, version, info                                  bool
	ns, id, socket, debugSocket, bundle, address, publish string
	action                                                string
}

// parseShimFlags parses args as containerd's shim does; ok is false for
// a flag it does not know, a version or info call, or not one action.
func parseShimFlags(args []string) (f shimFlags, ok bool) {
	fl := flag.NewFlagSet("front", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.BoolVar(&f.debug, "debug", false, "")
	fl.BoolVar(&f.version, "v", false, "")
	fl.BoolVar(&f.version, "version", false, "")
	fl.BoolVar(&f.info, "info", false, "")
	fl.StringVar(&f.ns, "namespace", "", "")
	fl.StringVar(&f.id, "id", "", "")
	fl.StringVar(&f.socket, "socket", "", "")
	fl.StringVar(&f.debugSocket, "debug-socket", "", "")
	fl.StringVar(&f.bundle, "bundle", "", "")
	fl.StringVar(&f.address, "address", "", "")
	fl.StringVar(&f.publish, "publish-binary", "", "")
	if fl.Parse(args) != nil || fl.NArg() != 1 || f.version || f.info {
		return shimFlags{}, false
	}
	f.action = fl.Arg(0)
	return f, true
}

// exitStatus is what `shim delete` reports of the task: the exit the
// shim recorded in the bundle (go-runc's Exit, as the runc shim writes it).
type exitStatus struct {
	Timestamp time.Time
	Pid       int
	Status    int
}

// cleanDelete answers `delete` with containerd's flags in args when the
// task is the cleaned-up case the package names; ok is false for every
// other call.
func cleanDelete(args []string) (st exitStatus, ok bool) {
	f, ok := parseShimFlags(args)
	if !ok || f.action != "delete" || !record.ValidName(f.ns) || f.id == "" {
		return exitStatus{}, false
	}
	ns, id := f.ns, f.id
	// The runc manager's Stop works from the working directory (the
	// bundle, where containerd runs `shim delete`); so does the full
	// shim's cleanup.
	cwd, err := os.Getwd()
	if err != nil || !operationCleaned(cwd) {
		return exitStatus{}, false
	}
	path := filepath.Join(filepath.Dir(cwd), id)
	if !runcStateGone(path, ns, id) || mountedUnder(filepath.Join(path, "rootfs")) {
		return exitStatus{}, false
	}
	return recordedExit(path)
}

// operationCleaned reports whether the full shim's cleanup would find
// nothing to do in bundle: no operation marker, or one whose operation is
// marked cleaned.
func operationCleaned(bundle string) bool {
	m, found, err := record.ReadBundleMark(bundle)
	if err != nil {
		return false
	}
	if !found {
		return true
	}
	cleaned, err := m.Cleaned()
	return err == nil && cleaned
}

// runcStateGone reports whether runc has no state directory for container
// id under the root the runc manager's Stop would give it: the runc
// options' root (options.json in the bundle at path), else runcRoot, then
// the namespace.
func runcStateGone(path, ns, id string) bool {
	root := runcRoot
	data, err := os.ReadFile(filepath.Join(path, "options.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false
	default:
		var opts runcOptions
		if json.Unmarshal(data, &opts) != nil {
			return false
		}
		if opts.Root != "" {
			root = opts.Root
		}
	}
	_, err = os.Lstat(filepath.Join(root, ns, id))
	return errors.Is(err, fs.ErrNotExist)
}

// runcOptions are containerd's runc options (options.Options) as
// runc.ReadOptions decodes them from options.json: every field with its
// JSON name and type, so that a file it refuses is refused here too
// (TestRuncOptionsFields).
type runcOptions struct {
	NoPivotRoot    bool   `json:"no_pivot_root,omitempty"`
	NoNewKeyring   bool   `json:"no_new_keyring,omitempty"`
	ShimCgroup     string `json:"shim_cgroup,omitempty"`
	IoUid          uint32 `json:"io_uid,omitempty"`
	IoGid          uint32 `json:"io_gid,omitempty"`
	BinaryName     string `json:"binary_name,omitempty"`
	Root           string `json:"root,omitempty"`
	SystemdCgroup  bool   `json:"systemd_cgroup,omitempty"`
	CriuImagePath  string `json:"criu_image_path,omitempty"`
	CriuWorkPath   string `json:"criu_work_path,omitempty"`
	TaskApiAddress string `json:"task_api_address,omitempty"`
	TaskApiVersion uint32 `json:"task_api_version,omitempty"`
}

// mountedUnder reports whether anything is mounted at or under target, as
// mount.UnmountRecursive finds it (the path resolved first; none when it
// does not exist), or whether that cannot be told: the runc manager's Stop
// unmounts it.
func mountedUnder(target string) bool {
	resolved, err := filepath.EvalSymlinks(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(resolved))
	return err != nil || len(mounts) > 0
}

// recordedExit is the exit the shim recorded in the bundle at path, if it
// is one the runc manager's Stop would report (runc.ReadExitStatus).
func recordedExit(path string) (exitStatus, bool) {
	f, err := os.Open(filepath.Join(path, "exit.json"))
	if err != nil {
		return exitStatus{}, false
	}
	defer f.Close()
	var e exitStatus
	if json.NewDecoder(f).Decode(&e) != nil || e.Pid <= 0 || e.Timestamp.IsZero() || e.Status < 0 {
		return exitStatus{}, false
	}
	return e, true
}

// deleteResponse is st as containerd's task API DeleteResponse in the
// protobuf wire format, as proto.Marshal writes it: pid = 1, exit_status =
// 2 (uint32 varints, left out when zero), exited_at = 3 (a
// google.protobuf.Timestamp: seconds = 1, nanos = 2).
func deleteResponse(st exitStatus) []byte {
	var ts []byte
	if s := st.Timestamp.Unix(); s != 0 {
		ts = appendVarintField(ts, 1, uint64(s))
	}
	if n := st.Timestamp.Nanosecond(); n != 0 {
		ts = appendVarintField(ts, 2, uint64(n))
	}
	var b []byte
	if p := uint32(st.Pid); p != 0 {
		b = appendVarintField(b, 1, uint64(p))
	}
	if s := uint32(st.Status); s != 0 {
		b = appendVarintField(b, 2, uint64(s))
	}
	return appendBytesField(b, 3, string(ts))
}

// appendVarintField appends field num as a protobuf varint.
func appendVarintField(b []byte, num int, v uint64) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|wireVarint)
	return binary.AppendUvarint(b, v)
}
