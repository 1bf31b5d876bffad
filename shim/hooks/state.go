package hooks

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
)

// State is the OCI state a hook reads on stdin (runtime-spec "state").
type State struct {
	OCIVersion  string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Status      string            `json:"status"` // "creating" at createRuntime, "stopped" at poststop
	Pid         int               `json:"pid,omitempty"`
	Bundle      string            `json:"bundle"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Statuses of the two stages this adapter serves.
const (
	StatusCreating = "creating"
	StatusStopped  = "stopped"
)

const maxStateBytes = 1 << 20

// containerd's and runc's identifier rules; podman's are 64 hex digits.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`)

// ReadState decodes and validates the state on r.
func ReadState(r io.Reader) (State, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxStateBytes+1))
	if err != nil {
		return State{}, fmt.Errorf("read the OCI state on stdin: %w", err)
	}
	if len(b) > maxStateBytes {
		return State{}, fmt.Errorf("the OCI state on stdin is over %d bytes", maxStateBytes)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("decode the OCI state on stdin: %w", err)
	}
	switch {
	case len(s.ID) == 0 || len(s.ID) > 128 || !idPattern.MatchString(s.ID):
		return State{}, fmt.Errorf("the OCI state names container id %q, which is not a runtime identifier", s.ID)
	case !filepath.IsAbs(s.Bundle) || filepath.Clean(s.Bundle) != s.Bundle:
		return State{}, fmt.Errorf("the OCI state names bundle %q, which is not an absolute, clean path", s.Bundle)
	case s.Status == StatusCreating && s.Pid <= 0:
		return State{}, fmt.Errorf("the OCI state of a creating container has no pid")
	case s.Status != StatusCreating && s.Status != StatusStopped:
		return State{}, fmt.Errorf("the OCI state has status %q: this hook serves the createRuntime (creating) and poststop (stopped) stages only", s.Status)
	}
	return s, nil
}
