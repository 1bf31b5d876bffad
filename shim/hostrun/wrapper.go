package hostrun

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// WrapperArg, as argv[1] of the gensee binary, makes it the wrapper of one
// host run (WrapperMain). The parent starts it; nobody else should.
const WrapperArg = "__gensee-host-wrapper"

// The wrapper's inherited fds (exec.Cmd.ExtraFiles order).
const (
	fdControl = 3 // parent -> wrapper: the wrapperSpec as JSON, then one byte "go" (EOF: abort)
	fdStatus  = 4 // wrapper -> parent: one wrapperStatus line; EOF after it means the exec happened
	fdExe     = 5 // the hashed executable
)

// wrapperSpec is what the parent tells the wrapper.
type wrapperSpec struct {
	Workspace string   `json:"workspace"`
	Upper     string   `json:"upper"`
	Work      string   `json:"work"`
	UID       uint32   `json:"uid"`
	GID       uint32   `json:"gid"`
	Args      []string `json:"args"`
	Env       []string `json:"env"`
	Script    bool     `json:"script"` // the executable starts with "#!": its fd must survive the exec
}

// wrapperStatus is the wrapper's report: Ready once everything but the
// exec is done, or the step that failed.
type wrapperStatus struct {
	Ready  bool   `json:"ready,omitempty"`
	Step   string `json:"step,omitempty"` // "mount", "credentials", "exec"
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Exit statuses of the wrapper when it could not exec the command; the
// parent reads the reason from the status fd, these only back it up.
const (
	wrapperSetupFailed = 125
	wrapperExecFailed  = 126
)

// WrapperMain is the wrapper: born in the run's cgroup and in its own mount
// namespace (the parent's clone flags), it stages the workspace, makes the
// rest read-only, waits for the parent's go, drops every privilege and
// executes the hashed fd. It returns only on failure.
func WrapperMain() int {
	// Credentials, the capability bounding set and no_new_privs are per
	// thread until the exec: do all of it, and the exec, on this one.
	runtime.LockOSThread()
	ctl := os.NewFile(fdControl, "control")
	st := os.NewFile(fdStatus, "status")
	report := func(s wrapperStatus) {
		b, _ := json.Marshal(s)
		st.Write(append(b, '\n'))
	}
	var spec wrapperSpec
	dec := json.NewDecoder(ctl)
	if err := dec.Decode(&spec); err != nil {
		report(wrapperStatus{Step: "control", Error: "read the run's spec: " + err.Error()})
		return wrapperSetupFailed
	}
	if err := stageMounts(spec); err != nil {
		report(wrapperStatus{Step: "mount", Reason: ReasonWorkspace, Error: err.Error()})
		return wrapperSetupFailed
	}
	if err := os.Chdir(spec.Workspace); err != nil {
		report(wrapperStatus{Step: "mount", Reason: ReasonWorkspace, Error: "enter the staged workspace: " + err.Error()})
		return wrapperSetupFailed
	}
	report(wrapperStatus{Ready: true})
	// Wait for the parent's go: the sensors and the deadline are running.
	if !awaitGo(io.MultiReader(dec.Buffered(), ctl)) {
		return wrapperSetupFailed // the parent gave up: nothing runs
	}
	ctl.Close()
	if err := dropPrivileges(spec.UID, spec.GID); err != nil {
		report(wrapperStatus{Step: "credentials", Reason: ReasonUser, Error: err.Error()})
		return wrapperSetupFailed
	}
	// Every inherited fd but stdio and the executable closes at the exec
	// (the status fd too: its EOF tells the parent the exec happened).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		report(wrapperStatus{Step: "exec", Error: "mark inherited fds close-on-exec: " + err.Error()})
		return wrapperSetupFailed
	}
	if spec.Script {
		// The kernel hands a script's interpreter /dev/fd/N: N must stay open.
		if _, err := unix.FcntlInt(fdExe, unix.F_SETFD, 0); err != nil {
			report(wrapperStatus{Step: "exec", Error: "keep the script's fd open: " + err.Error()})
			return wrapperSetupFailed
		}
	}
	err := execveat(fdExe, spec.Args, spec.Env)
	report(wrapperStatus{Step: "exec", Reason: ReasonCommand, Error: fmt.Sprintf("execute %s as uid %d: %v", spec.Args[0], spec.UID, err)})
	return wrapperExecFailed
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
