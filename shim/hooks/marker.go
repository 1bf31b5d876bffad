package hooks

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// markersDir holds, per operation in progress, a marker written before its
// table exists and removed once it is gone, and the monitor's socket. A
// marker whose monitor (by pid and start time) is dead names an orphan.
const markersDir = "ocihooks"

type marker struct {
	OperationID string         `json:"operation_id"`
	ContainerID string         `json:"container_id"`
	Table       string         `json:"table"`
	Netns       spec.NetnsKind `json:"netns"`
	NetnsPath   string         `json:"netns_path,omitempty"`
	// Cgroup and CgroupID are the container's cgroup v2 (path, and the id
	// that tells this cgroup from a later one at the same path): what the
	// orphan cleanup drains before it removes the table. Empty in markers
	// written before they existed.
	Cgroup   string `json:"cgroup,omitempty"`
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	Monitor  owner  `json:"monitor"`
}

// socketPath is where operation opID's monitor listens for poststop.
func socketPath(stateDir, opID string) string {
	return filepath.Join(stateDir, markersDir, opID+".sock")
}

func writeMarker(stateDir string, m marker) error {
	return record.Store{Dir: stateDir}.WriteMarker(markersDir, m.OperationID, m)
}

func removeMarker(stateDir, opID string) {
	os.Remove(socketPath(stateDir, opID))
	record.Store{Dir: stateDir}.RemoveMarker(markersDir, opID)
}

func (m marker) Operation() string { return m.OperationID }

// Orphaned: the monitor (by pid and start time) is gone, or is a zombie:
// it runs no more, and whoever it was reparented to (the engine's
// subreaper, the host's init) may never wait for it.
func (m marker) Orphaned() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(m.Monitor.PID) + "/stat")
	if err != nil {
		return true
	}
	st, err := cgroup.ParseStat(b)
	return err != nil || st.Start != m.Monitor.Start || zombie(b)
}

// zombie: a /proc/<pid>/stat line's state (the field after comm) is Z.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	return len(f) > 0 && string(f[0]) == "Z"
}

func selfOwner() (owner, error) {
	p, err := cgroup.Self()
	return owner(p), err
}
