// Package specpolicy admits an OCI runtime spec (the container's config.json and every
// exec's process spec) before the shim hands it to runc.
//
// It owns the allowlist, anchored on Kubernetes Pod Security Standards *baseline*:
// containerd's default capabilities minus CAP_NET_RAW plus what the contract grants;
// hooks only from the operator's allowlist; only the devices and device-cgroup rules
// containerd itself creates; no writable kernel filesystem and no runtime socket in a
// mount; containerd's masked and read-only /proc paths; private pid, ipc (and, with a
// cgroup mount, cgroup) namespaces; network-namespaced sysctls only; and a seccomp
// profile that refuses the socket families nftables cannot see (see seccomp.go).
// shim/runcfeatures reads `runc features` so a runc that would silently drop that
// profile is refused.
//
// It may only narrow a spec: remove CAP_NET_RAW, add seccomp rules, force
// noNewPrivileges on exec. It must never widen one (add a capability, mount, device or
// allow rule the caller did not ask for), never touch the kernel or the filesystem
// (the optional Operator.FSTyper seam is the shim's, called only on caller-chosen bind
// sources), and never guess: anything it cannot interpret exactly is refused with a
// *spec.Refusal naming the rule, the spec field and the fix.
package specpolicy
