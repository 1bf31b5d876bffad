package hooks

import (
	"github.com/gensee/gensee/shim/nsfile"
	"github.com/gensee/gensee/spec"
)

// admissionRecord is admission.json of a hook operation: why this contract
// governs this container, and who the container is.
type admissionRecord struct {
	spec.Admission
	// The hook's own: what the poststop hook needs to finish the operation.
	Bundle   string     `json:"bundle"`
	RootPath string     `json:"root_path"`
	Diff     diffSource `json:"diff"`
	Mounts   []string   `json:"mounts,omitempty"` // mount destinations (stubs in the upperdir)
	NetnsID  *nsfile.ID `json:"netns_id,omitempty"`
	// Monitor is the per-operation monitor process (pid, start time).
	Monitor *owner `json:"monitor,omitempty"`
}

// owner is a process beyond pid reuse.
type owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}
