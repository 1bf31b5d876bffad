package service

import (
	"errors"

	"github.com/gensee/gensee/shim/runtimeopts"
	"github.com/gensee/gensee/spec"
)

// A createCheck is one of Create's preflight checks, as runc's
// libcontainer/configs/validate keeps them: it refuses the task or
// returns nil, and may record in c what it derived for the steps after
// it. A check never returns another error: what it cannot judge, it
// refuses.
type createCheck func(s *service, c *creation) *spec.Refusal

// requestChecks run on the request alone, in this order, before anything
// is mounted or loaded.
var requestChecks = []createCheck{
	holdTaskStdio,
	checkRootfsMounts,
}

// specChecks run on the spec, in this order, before admit.
var specChecks = []createCheck{
	refuseCheckpoint,
	checkNamespaces,
	checkRuntimeOptions,
	checkUsernsPath,
	checkNetnsPath,
	checkCgroupPath,
	checkJoinedNamespaces,
	checkNamespacePaths,
	checkSeccomp,
}

// runChecks runs checks in order; the first refusal ends them.
func runChecks(s *service, c *creation, checks []createCheck) *spec.Refusal {
	for _, check := range checks {
		if rf := check(s, c); rf != nil {
			return rf
		}
	}
	return nil
}

// holdTaskStdio admits and opens the task's stdio: the runc shim opens
// these as root on the host.
func holdTaskStdio(_ *service, c *creation) *spec.Refusal {
	var rf *spec.Refusal
	c.held, rf = holdStdio("task", &c.r.Stdin, &c.r.Stdout, &c.r.Stderr, c.cfg.LoggerAllowlist)
	return rf
}

// checkRootfsMounts admits the rootfs mounts, the client's (WithRootFS),
// before anything mounts them as root on the host.
func checkRootfsMounts(_ *service, c *creation) *spec.Refusal {
	return checkRootfs(c.r, c.cfg)
}

// refuseCheckpoint refuses a restore: runc would restore processes from a
// CRIU image with whatever capabilities, seccomp state and sockets were
// dumped, nothing of which was admitted.
func refuseCheckpoint(_ *service, c *creation) *spec.Refusal {
	if cp := c.r.Checkpoint + c.r.ParentCheckpoint; cp != "" {
		return refuse("checkpoint_restore", "the task is to be restored from checkpoint %q, whose processes were never admitted; start it from its image instead", cp)
	}
	return nil
}

// checkNamespaces reads where the sockets live and the user namespace.
func checkNamespaces(_ *service, c *creation) *spec.Refusal {
	var rf *spec.Refusal
	c.kind, c.nsPath, c.uns, rf = namespacesOf(c.oci)
	return rf
}

// checkRuntimeOptions admits the caller's runtime options against the
// operator's.
func checkRuntimeOptions(_ *service, c *creation) *spec.Refusal {
	o, err := c.rt.RuncOptions(c.cfg)
	if err != nil {
		field := "options"
		var or *runtimeopts.OptionRefusal
		if errors.As(err, &or) {
			field += "." + or.Field
		}
		return spec.Refuse("runtime_options", field, "", "%v", err)
	}
	c.runc = o
	return nil
}

// checkUsernsPath admits a user namespace joined by path: only a pod's
// (CRI pins it); elsewhere runc makes the container its own.
func checkUsernsPath(_ *service, c *creation) *spec.Refusal {
	if c.uns.path == "" {
		return nil
	}
	if c.ns != CRINamespace {
		return refuse("userns_path", "linux.namespaces user path %q: only CRI's pods join a user namespace by path; let runc make the container its own (drop the path)", c.uns.path)
	}
	var rf *spec.Refusal
	c.wantUserns, rf = checkJoinedUserns(c.uns.path, c.oci.Linux.UIDMappings)
	return rf
}

// checkNetnsPath admits the owner of a netns joined by path.
func checkNetnsPath(_ *service, c *creation) *spec.Refusal {
	if c.kind != netnsPath {
		return nil
	}
	var rf *spec.Refusal
	c.wantNetns, rf = checkJoinedNetns(c.nsPath, c.uns)
	return rf
}

// checkCgroupPath refuses a cgroupfs path that names a busy cgroup.
func checkCgroupPath(_ *service, c *creation) *spec.Refusal {
	if c.oci.Linux == nil {
		return nil
	}
	return refusal(refuseBusyCgroup(c.oci.Linux.CgroupsPath), "cgroup_not_own")
}

// checkJoinedNamespaces refuses a mount or cgroup namespace, or the
// host's pid or ipc one, joined by path.
func checkJoinedNamespaces(_ *service, c *creation) *spec.Refusal {
	return refuseJoinedNamespaces(c.oci)
}

// checkNamespacePaths applies the pod-anchored allowlist of namespaces
// joined by path.
func checkNamespacePaths(_ *service, c *creation) *spec.Refusal {
	var rf *spec.Refusal
	c.netnsAlone, rf = checkJoinPaths(c.oci, scopeOf(c.ns, c.r.ID, c.r.Bundle, c.oci.Annotations), kernelNS{})
	return rf
}

// checkSeccomp refuses a runc that would drop the seccomp profile.
func checkSeccomp(s *service, c *creation) *spec.Refusal {
	var err error
	if c.runcPath, err = s.seccomp.check(c.runc.BinaryName, c.cfg.StateDir); err != nil {
		return refuse("seccomp_unavailable", "%v; the runtime closes the socket families nftables cannot see with seccomp, so it refuses to run without it: build runc with -tags seccomp (libseccomp) or point the operator config's [runc] BinaryName at one that has it", err)
	}
	return nil
}

// refusal is err as a refusal: err's own, or one for reason when err is
// another error (a check refuses what it cannot judge).
func refusal(err error, reason string) *spec.Refusal {
	if err == nil {
		return nil
	}
	if rf, ok := spec.AsRefusal(err); ok {
		return rf
	}
	return refuse(reason, "%v", err)
}
