package specpolicy

import (
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// CheckSpec admits the whole container spec (init process included) and narrows it in
// place. Every check runs before the first change, so a refused spec is left as it was.
// The error is a *spec.Refusal.
func CheckSpec(s *specs.Spec, g Grants, op Operator) (Result, error) {
	var res Result
	if s == nil {
		return res, refuse(RuleNoSpec, "", "the container has no runtime spec; pass config.json in the bundle")
	}
	if err := checkCaps(s.Process, g); err != nil {
		return res, err
	}
	if err := checkHooks(s.Hooks, op); err != nil {
		return res, err
	}
	if err := checkDevices(s.Linux); err != nil {
		return res, err
	}
	if err := checkNetDevices(s.Linux); err != nil {
		return res, err
	}
	if err := checkProcessPowers(s.Process, "process", op.OOMScoreAdjFloor); err != nil {
		return res, err
	}
	cgroupMount, cgroupBind, err := checkMounts(s.Mounts, op)
	if err != nil {
		return res, err
	}
	if err := checkKernelFSDestinations(s.Mounts); err != nil {
		return res, err
	}
	if err := checkProcPaths(s.Linux); err != nil {
		return res, err
	}
	if err := checkNamespaces(s, cgroupMount); err != nil {
		return res, err
	}
	if err := checkCgroupBind(s, cgroupBind, op); err != nil {
		return res, err
	}
	if err := checkSysctls(s); err != nil {
		return res, err
	}
	if s.Linux != nil {
		if err := CheckResources(s.Linux.Resources, "linux.resources"); err != nil {
			return res, err
		}
	}
	merged, rec, err := admitSeccomp(s, op.NoX32ABI)
	if err != nil {
		return res, err
	}

	// Admitted: narrow.
	res.Notes = notes(s.Process)
	if s.Process != nil && s.Process.Capabilities == nil {
		// runc leaves a process without a capabilities object with every
		// capability root has: the default set, explicitly.
		s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: slices.Clone(Default),
			Effective: slices.Clone(Default), Permitted: slices.Clone(Default)}
		res.Notes = append(res.Notes, "process.capabilities: absent (runc would keep every capability); set to the default set")
	}
	res.CapabilitiesRemoved = dropNetRaw(s.Process)
	privateBinds(s.Mounts)
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	s.Linux.Seccomp = merged
	res.Seccomp = rec
	return res, nil
}

// CheckProcess admits an exec's process spec with the same capability policy and narrows
// it in place: CAP_NET_RAW leaves every set, NoNewPrivileges is forced on (an exec must
// not gain privileges through setuid binaries the init process was denied). Scheduling,
// I/O class and oom_score_adj are held to Create's rules (op.OOMScoreAdjFloor).
func CheckProcess(p *specs.Process, g Grants, op Operator) (removed []string, err error) {
	if p == nil {
		return nil, refuse(RuleNoSpec, "process", "the exec has no process spec; pass one")
	}
	if err := checkCaps(p, g); err != nil {
		return nil, err
	}
	if err := checkProcessPowers(p, "process", op.OOMScoreAdjFloor); err != nil {
		return nil, err
	}
	removed = dropNetRaw(p)
	p.NoNewPrivileges = true
	return removed, nil
}

// notes records weakened LSM confinement. PSS baseline would refuse both; we record
// them instead because the network boundary does not rest on the LSM (seccomp, the
// capability set and the netns table do), and some hosts run without one.
func notes(p *specs.Process) []string {
	if p == nil {
		return nil
	}
	var n []string
	if p.ApparmorProfile == "unconfined" {
		n = append(n, "process.apparmorProfile: unconfined")
	}
	if parts := strings.Split(p.SelinuxLabel, ":"); len(parts) >= 3 {
		switch parts[2] {
		case "spc_t", "unconfined_t":
			n = append(n, "process.selinuxLabel: "+parts[2])
		}
	}
	return n
}
