package inner

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// WrapperArg, as argv[1] of gensee-sandbox (or of gensee itself), makes
// it the wrapper of one host run (WrapperMain); StageArg the stage
// (StageMain); LingerArg the holder of the parent's last netfilter
// sockets (LingerMain). The parent and the wrapper start them; nobody
// else should.
const (
	WrapperArg = "__gensee-host-wrapper"
	StageArg   = "__gensee-host-stage"
	LingerArg  = "__gensee-host-linger"
)

// LingerMain holds what it inherited (the sockets that deleted the run's
// table) and exits: its exit, not the parent's, waits until the kernel
// has freed the table (netpolicy's linger.go), and nobody waits for it.
func LingerMain() int { return 0 }

// The wrapper's inherited fds (exec.Cmd.ExtraFiles order).
const (
	fdControl = 3 // parent -> wrapper: the Spec as JSON, then one byte "go" (EOF: abort)
	fdStatus  = 4 // wrapper and stage -> parent: Status lines: ready; the stage's applied line, or its failure; the wrapper's lingering count; EOF when the wrapper exits
	fdExe     = 5 // the sealed executable (the script, for a #! script)
	fdInterp  = 6 // the sealed #! interpreter, when there is one
)

// The stage's inherited fds besides fdStatus, fdExe and fdInterp.
const (
	fdStageSpec = 3 // wrapper -> stage: the stageSpec as JSON, then one byte "go" (EOF: abort)
	fdTree      = 7 // the staged workspace's mount (O_PATH): its cwd and Landlock rule
)

// OverlayVolatile is the overlay flag that skips every sync of the upper
// dir's file system (the unmount's among them): the parent asks for it,
// and the wrapper mounts without it on a kernel that refuses it.
const OverlayVolatile = "volatile"

// Spec is what the parent tells the wrapper.
type Spec struct {
	Workspace string `json:"workspace"`
	// WorkspaceDev and WorkspaceIno identify the directory admission
	// checked: the wrapper mounts the directory it opens only if it is
	// that one (a swapped path is refused).
	WorkspaceDev uint64 `json:"workspace_dev"`
	WorkspaceIno uint64 `json:"workspace_ino"`
	Upper        string `json:"upper"`
	Work         string `json:"work"`
	// OverlayOptions follow lowerdir, upperdir and workdir in the staged
	// workspace's overlay (the gate's hardening: metacopy=off,
	// redirect_dir=nofollow; and OverlayVolatile), each "key=value" or a
	// flag.
	OverlayOptions []string `json:"overlay_options"`
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	Args           []string `json:"args"`
	Env            []string `json:"env"`
	// InterpArgs is set for a #! script: fdInterp is executed with these,
	// then /dev/fd/<fdExe>, then Args[1:].
	InterpArgs []string `json:"interp_args,omitempty"`
	// RuntimeFiles are the operator's allowed_runtime_files: the only
	// paths below /run the command still reaches.
	RuntimeFiles []string `json:"runtime_files,omitempty"`
	// HostMountNS is the parent's ns/mnt link (the host's mount
	// namespace, which the wrapper left at birth): the binders of
	// relative-bound sockets are looked for there (hostSockets).
	HostMountNS string `json:"host_mount_ns,omitempty"`
}

// Status is a report line to the parent: Ready (with what was
// masked) once the wrapper's view is built; Applied by the stage just
// before its exec; or the step that failed.
type Status struct {
	Ready  bool     `json:"ready,omitempty"`
	Masked []string `json:"masked,omitempty"`
	// Tmpfs, with Ready, are the private tmpfs the wrapper mounted: with
	// the staged workspace, every place the command can write.
	Tmpfs []string `json:"tmpfs,omitempty"`
	// Volatile, with Ready: the staged workspace's overlay took
	// OverlayVolatile (a kernel before 5.10 refuses it).
	Volatile bool     `json:"volatile,omitempty"`
	Applied  *Applied `json:"applied,omitempty"`
	// Lingering, in the wrapper's last line, counts the processes the
	// command left in the run's pid namespace, killed when it exited.
	Lingering *int   `json:"lingering,omitempty"`
	Step      string `json:"step,omitempty"` // "mount", "stage", "credentials", "landlock", "seccomp", "exec"
	Reason    string `json:"reason,omitempty"`
	Error     string `json:"error,omitempty"`
}

func reporter(f *os.File) func(Status) {
	return func(s Status) {
		b, _ := json.Marshal(s)
		f.Write(append(b, '\n'))
	}
}

// Reasons a failure line names (shim/hostrun's refusal reasons of the
// same names).
const (
	ReasonWorkspace = "workspace"
	ReasonUser      = "user"
	ReasonCommand   = "command"
)

// Exit statuses of the wrapper when it could not exec the command; the
// parent reads the reason from the status fd, these only back it up.
const (
	wrapperSetupFailed = 125
	wrapperExecFailed  = 126
)

// Forwarded are the signals the wrapper hands on to the stage (the
// command): pid 1 of a pid namespace gets only the signals it handles.
var Forwarded = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT}

// WrapperMain is pid 1 of a host run. It returns the command's status (its
// exit code, or 128+n when signal n ended it) or, on failure before the
// exec, wrapperSetupFailed with the reason on the status fd.
//
// Ordering: the view is begun (openView: the run's procfs, the staged
// workspace), the stage is started, and the view finished; the stage gets
// its spec and ready is reported. The stage's start (its exec, then
// dropping privileges, Landlock and its filter built once it has its spec)
// overlaps the view's last mounts and the parent's arming of the sensors
// and the deadline; it then waits, as the wrapper does, for the parent's
// go, which the wrapper hands on to it. Nothing of the command runs before
// the go: a failure, or a parent that gives up (EOF), ends the wrapper,
// pid 1, and with it the pid namespace and the stage.
func WrapperMain() int {
	runtime.LockOSThread()
	ctl := os.NewFile(fdControl, "control")
	st := os.NewFile(fdStatus, "status")
	report := reporter(st)
	var spec Spec
	dec := json.NewDecoder(ctl)
	if err := dec.Decode(&spec); err != nil {
		report(Status{Step: "control", Error: "read the run's spec: " + err.Error()})
		return wrapperSetupFailed
	}
	// Born in the run's cgroup: a cgroup namespace made now is rooted there.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		report(Status{Step: "mount", Error: "unshare the cgroup namespace: " + err.Error()})
		return wrapperSetupFailed
	}
	view, err := openView(spec)
	if err != nil {
		report(Status{Step: "mount", Reason: ReasonWorkspace, Error: err.Error()})
		return wrapperSetupFailed
	}
	stage, err := startStage(spec, view, st)
	if err != nil {
		report(Status{Step: "stage", Error: err.Error()})
		return wrapperSetupFailed
	}
	if err := view.finish(spec); err != nil {
		report(Status{Step: "mount", Reason: ReasonWorkspace, Error: err.Error()})
		return wrapperSetupFailed
	}
	if err := stage.send(spec, view); err != nil {
		report(Status{Step: "stage", Error: err.Error()})
		return wrapperSetupFailed
	}
	report(Status{Ready: true, Masked: view.masked, Tmpfs: view.tmpfs, Volatile: view.volatile})
	// Wait for the parent's go: the sensors and the deadline are running.
	if !awaitGo(io.MultiReader(dec.Buffered(), ctl)) {
		return wrapperSetupFailed // the parent gave up: nothing runs
	}
	ctl.Close()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, Forwarded...)
	stage.start()
	go func() {
		for s := range sigs {
			unix.Kill(stage.pid, s.(syscall.Signal))
		}
	}()
	status := reap(stage.pid)
	n := killLingering()
	report(Status{Lingering: &n})
	return status
}

// killLingering kills, as pid 1, every process the command left in the
// run's pid namespace and reaps them (orphans are re-parented to pid 1, so
// every one is reaped here), returning how many there were.
func killLingering() int {
	unix.Kill(-1, unix.SIGKILL)
	n := 0
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n
		}
		n++
	}
}

// stageProc is the started stage, waiting for its spec, then its go.
type stageProc struct {
	pid  int
	ctl  *os.File   // the stage's spec pipe: its spec, then the go
	sent chan error // the spec's write, done
}

// send hands the stage its spec, once the view is finished and read-only
// (the stage's id maps were written before): it drops its privileges and
// applies Landlock to the finished view only.
func (s *stageProc) send(spec Spec, v *view) error {
	b, err := json.Marshal(stageSpec{UID: spec.UID, GID: spec.GID, Args: spec.Args, Env: spec.Env, InterpArgs: spec.InterpArgs,
		Writable: v.writable})
	if err != nil {
		return err
	}
	// A spec larger than the pipe's buffer is read as the stage starts.
	go func() { _, err := s.ctl.Write(b); s.sent <- err }()
	return nil
}

// start hands the parent's go on to the stage, after its spec.
func (s *stageProc) start() {
	if err := <-s.sent; err == nil {
		s.ctl.Write([]byte{'g'}) // a stage that failed already has said why
	}
	s.ctl.Close()
}

// startStage starts the stage in its user namespace, mapping only the
// invoking uid and gid (each to itself); its id maps are written through
// the run's procfs, still writable. The stage reads its spec from a pipe
// (send), then waits on it for the go (start); it inherits the status fd,
// the staged workspace's mount and the sealed files.
func startStage(spec Spec, view *view, st *os.File) (*stageProc, error) {
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stage spec pipe: %w", err)
	}
	defer sr.Close()
	interp := os.NewFile(fdInterp, "interp")
	if spec.InterpArgs == nil {
		interp = nil
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr, sr, st, os.NewFile(fdExe, "exe"), interp, view.tree}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd() // ^0 (closed in the stage) for a nil file
	}
	// syscall.ForkExec, not os.StartProcess: the wrapper reaps by pid as
	// pid 1 (reap), and os's first start would probe pidfd support with a
	// child of its own on this path.
	pid, err := syscall.ForkExec(view.self, []string{"gensee", StageArg}, &syscall.ProcAttr{
		Env: []string{}, Files: fds,
		Sys: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(spec.UID), HostID: int(spec.UID), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(spec.GID), HostID: int(spec.GID), Size: 1}},
			// setgroups stays allowed in the namespace so the stage can
			// replace root's groups with the user's; it holds no
			// CAP_SETGID once it is the user.
			GidMappingsEnableSetgroups: true,
			// An exec in the namespace by a uid it does not map keeps only
			// ambient capabilities: the three dropPrivileges needs (bounding
			// set and securebits, groups, gid and uid), of this namespace
			// only, all cleared before the command's exec.
			AmbientCaps: []uintptr{unix.CAP_SETPCAP, unix.CAP_SETUID, unix.CAP_SETGID},
		},
	})
	runtime.KeepAlive(files)
	if err != nil {
		sw.Close()
		return nil, fmt.Errorf("start the stage in a user namespace: %w", err)
	}
	return &stageProc{pid: pid, ctl: sw, sent: make(chan error, 1)}, nil
}

// reap waits, as pid 1, for every child until the stage's own exit, and
// returns its status the way a shell reports it.
func reap(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return wrapperExecFailed
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// awaitGo reads past the spec's trailing newline to the parent's 'g'.
func awaitGo(r io.Reader) bool {
	var b [1]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return false
		}
		switch b[0] {
		case '\n', ' ', '\t', '\r':
			continue
		}
		return b[0] == 'g'
	}
}
