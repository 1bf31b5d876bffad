package hooks

import (
	"encoding/json"
	"fmt"
	"io"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/specpolicy"
)

// SeccompProfile returns the profile an operator hands the engine so the
// hook admits its containers: base (an OCI linux.seccomp object, or a whole
// config.json whose linux.seccomp is taken; empty: containerd's default
// profile, RuntimeDefault, as the shim gives a spec without one) merged with the boundary's
// rules exactly as the shim merges them. The JSON is also a valid
// containers-common (podman --security-opt seccomp=FILE) profile: the field
// names are the same.
func SeccompProfile(base io.Reader) ([]byte, error) {
	var old *specs.LinuxSeccomp
	if base != nil {
		b, err := io.ReadAll(io.LimitReader(base, 16<<20))
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			var probe struct {
				Linux *specs.Linux `json:"linux"`
			}
			if err := json.Unmarshal(b, &probe); err != nil {
				return nil, fmt.Errorf("decode the base profile: %w", err)
			}
			if probe.Linux != nil {
				old = probe.Linux.Seccomp
			} else {
				old = &specs.LinuxSeccomp{}
				if err := json.Unmarshal(b, old); err != nil {
					return nil, fmt.Errorf("decode the base profile: %w", err)
				}
			}
		}
	}
	if old == nil {
		old = specpolicy.RuntimeDefault()
	}
	merged, _, err := specpolicy.MergeSeccomp(old)
	if err != nil {
		return nil, err
	}
	if err := specpolicy.SeccompHolds(merged, SeccompFix); err != nil {
		return nil, fmt.Errorf("the merged profile does not hold: %w", err)
	}
	return json.MarshalIndent(merged, "", "  ")
}
