package runcfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/cgroup"
)

// maxStateBytes bounds state.json (it holds the container's whole
// libcontainer config: tens of KiB).
const maxStateBytes = 8 << 20

// cgroupRoot is where every cgroup path the front removes must lie.
const cgroupRoot = "/sys/fs/cgroup/"

// state is what the front reads of runc's state.json (libcontainer's
// State, runc 1.2 to 1.5): JSON names as libcontainer writes them.
type state struct {
	InitPID         int               `json:"init_process_pid"`
	InitStart       uint64            `json:"init_process_start"`
	Rootless        bool              `json:"rootless"`
	CgroupPaths     map[string]string `json:"cgroup_paths"`
	IntelRdtPath    string            `json:"intel_rdt_path"`
	IntelRdtMonPath string            `json:"intel_rdt_mon_path"`
	Config          struct {
		Namespaces []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"namespaces"`
		Hooks           map[string][]json.RawMessage `json:"Hooks"`
		IntelRdt        json.RawMessage              `json:"intel_rdt"`
		RootlessEUID    bool                         `json:"rootless_euid"`
		RootlessCgroups bool                         `json:"rootless_cgroups"`
		Cgroups         *struct {
			Systemd  bool `json:"Systemd"`
			Rootless bool `json:"Rootless"`
		} `json:"cgroups"`
	} `json:"config"`
}

// readState reads <dir>/state.json.
func readState(dir string) (state, error) {
	var st state
	b, err := fsafe.ReadFile(filepath.Join(dir, "state.json"), maxStateBytes)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode %s: %w", filepath.Join(dir, "state.json"), err)
	}
	if st.InitPID <= 0 {
		return st, fmt.Errorf("%s names no init", filepath.Join(dir, "state.json"))
	}
	return st, nil
}

// init is the container's init beyond pid reuse.
func (st state) init() cgroup.Proc {
	return cgroup.Proc{PID: st.InitPID, Start: st.InitStart}
}

// running reports whether p runs as runc judges it (libcontainer's
// runType): its pid names a process with its start time that is neither a
// zombie nor dead.
func running(p cgroup.Proc) bool {
	s, err := cgroup.ReadStat(p.PID)
	return err == nil && s.Start == p.Start && s.State != 'Z' && s.State != 'X'
}

// plainDestroy reports whether runc's destroy of this stopped container
// is only removing its cgroup paths and its state directory: no hook to
// run (any hook at all), its own pid namespace (no process left to kill),
// no Intel RDT group, cgroupfs without systemd or rootless cgroups.
func (st state) plainDestroy() bool {
	c := st.Config
	for _, h := range c.Hooks {
		if len(h) > 0 {
			return false
		}
	}
	ownPidns := false
	for _, ns := range c.Namespaces {
		if ns.Type == "NEWPID" && ns.Path == "" {
			ownPidns = true
		}
	}
	rdt := len(bytes.TrimSpace(c.IntelRdt)) > 0 && string(bytes.TrimSpace(c.IntelRdt)) != "null"
	return ownPidns && !rdt && st.IntelRdtPath == "" && st.IntelRdtMonPath == "" &&
		!st.Rootless && !c.RootlessEUID && !c.RootlessCgroups &&
		c.Cgroups != nil && !c.Cgroups.Systemd && !c.Cgroups.Rootless
}

// cgroupDirs are the recorded cgroup paths, each a clean absolute path
// under /sys/fs/cgroup; ok is false when one is not.
func (st state) cgroupDirs() (dirs []string, ok bool) {
	for _, p := range st.CgroupPaths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || !strings.HasPrefix(p, cgroupRoot) {
			return nil, false
		}
		dirs = append(dirs, p)
	}
	return dirs, true
}

// frozen reports whether the container's cgroup is, or may be, frozen
// (runc then answers "paused", and will not delete it): the v1 freezer's
// state other than THAWED, or a cgroup v2 cgroup.freeze of 1. A file that
// does not exist is not frozen; one that cannot be read may be.
func (st state) frozen() bool {
	check := func(path, thawed string) bool {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		return err != nil || strings.TrimSpace(string(b)) != thawed
	}
	if p, ok := st.CgroupPaths["freezer"]; ok && check(filepath.Join(p, "freezer.state"), "THAWED") {
		return true
	}
	if p, ok := st.CgroupPaths[""]; ok && check(filepath.Join(p, "cgroup.freeze"), "0") {
		return true
	}
	return false
}
