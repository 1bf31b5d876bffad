// Package runcfeatures reads what a runc binary says about itself (`runc
// features`, the OCI features document), for specpolicy's seccomp rule: a
// runc that does not apply seccomp would silently drop the profile
// specpolicy adds. Parsing only; running the binary is the caller's (the
// shim runs children through its reaper, gensee probe directly). It is a
// package of its own so the CLI reads it without linking specpolicy and
// what that imports (containerd's default seccomp profile, its OCI spec
// and image packages).
package runcfeatures

import (
	"encoding/json"
	"fmt"
)

// runcFeatures is the part of the OCI features document read here.
type runcFeatures struct {
	Linux struct {
		Seccomp struct {
			Enabled *bool `json:"enabled"`
		} `json:"seccomp"`
	} `json:"linux"`
}

// SeccompEnabled reports whether the `runc features` output b says runc
// applies seccomp profiles. Absent means no: a runc that does not say so
// would silently ignore linux.seccomp.
func SeccompEnabled(b []byte) (bool, error) {
	var f runcFeatures
	if err := json.Unmarshal(b, &f); err != nil {
		return false, fmt.Errorf("read runc features: %w", err)
	}
	return f.Linux.Seccomp.Enabled != nil && *f.Linux.Seccomp.Enabled, nil
}
