package evidence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/cgroup"
)

// procSource is the binding poller's seam to /proc: the host's pids, a
// process's pid namespace, its stat line.
type procSource interface {
	List() ([]int, error)
	PidNS(pid int) (uint64, error) // inode of /proc/<pid>/ns/pid
	Stat(pid int) (cgroup.Stat, error)
}

// hostProc reads the real /proc.
type hostProc struct{}

func (hostProc) List() ([]int, error)              { return cgroup.ListPIDs() }
func (hostProc) Stat(pid int) (cgroup.Stat, error) { return cgroup.ReadStat(pid) }
func (hostProc) PidNS(pid int) (uint64, error) {
	return readNSLink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
}

// readNSLink reads a namespace link: one readlink, no open.
func readNSLink(path string) (uint64, error) {
	s, err := os.Readlink(path)
	if err != nil {
		return 0, err
	}
	return parseNSLink(s)
}

// parseNSLink reads the inode from "pid:[4026531836]".
func parseNSLink(s string) (uint64, error) {
	v, ok := strings.CutPrefix(s, "pid:[")
	v, ok2 := strings.CutSuffix(v, "]")
	if !ok || !ok2 {
		return 0, fmt.Errorf("%q is not a pid namespace link", s)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("pid namespace link %q: %w", s, err)
	}
	return n, nil
}

// initNS reads who the container's init is: its pid namespace and whether
// the namespace is its own (the init is pid 1 in it: private) or joined
// (another process is; a pod's shared pid namespace). It refuses when init
// is not the process start names, and reports host for the caller's own pid
// namespace (the host's: refused at admission; then nothing is scanned).
func initNS(src procSource, init cgroup.Proc) (ns uint64, private, host bool, err error) {
	if st, err := src.Stat(init.PID); err != nil {
		return 0, false, false, fmt.Errorf("read init %d: %w", init.PID, err)
	} else if init.Start != 0 && st.Start != init.Start {
		return 0, false, false, fmt.Errorf("init %s: %w", init, cgroup.ErrGone)
	}
	if ns, err = src.PidNS(init.PID); err != nil {
		return 0, false, false, fmt.Errorf("pid namespace of init %d: %w", init.PID, err)
	}
	self, err := readNSLink("/proc/self/ns/pid")
	if err != nil {
		return 0, false, false, fmt.Errorf("own pid namespace: %w", err)
	}
	if ns == self {
		return ns, false, true, nil
	}
	inner, err := innermostPID(init.PID)
	if err != nil {
		return 0, false, false, err
	}
	return ns, inner == 1, false, nil
}

// innermostPID is the last NSpid entry of /proc/<pid>/status: pid's pid in
// its own pid namespace.
func innermostPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("status of %d: %w", pid, err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(string(f[len(f)-1]))
		}
	}
	return 0, errors.New("status of " + strconv.Itoa(pid) + ": no NSpid line")
}
