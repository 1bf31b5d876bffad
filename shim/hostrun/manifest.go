package hostrun

import (
	"slices"

	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/hostrun/inner"
	"github.com/gensee/gensee/spec"
)

// sandboxOf is the manifest's account of the layers: the wrapper's view
// (ready) and what the stage applied, nothing only asked for.
func sandboxOf(ready inner.Status, applied *inner.Applied, io *stdio) *spec.HostSandbox {
	sb := &spec.HostSandbox{
		Namespaces: []string{"user (the invoking uid and gid, each mapped to itself; nothing else mapped)", "pid (the command is not pid 1; no host process is visible)",
			"ipc", "uts", "cgroup (rooted at the run's cgroup)", "mount"},
		Session:    "a new session (setsid) without a controlling terminal",
		Stdio:      io.describe(),
		Executable: "a sealed memfd copy of the hashed bytes (F_SEAL_WRITE, F_SEAL_GROW, F_SEAL_SHRINK, F_SEAL_SEAL), executed by fd; a script's interpreter the same way",
		Seccomp:    applied.Seccomp,
		Masked:     ready.Masked,
	}
	if a := applied.Landlock; a != nil {
		sb.Landlock = &spec.LandlockLayer{ABI: a.ABI, FS: a.FS, Net: a.Net, Scoped: a.Scoped, Missing: a.Missing}
	}
	return sb
}

// landlockScoped reports whether the command's Landlock domain scoped what.
func landlockScoped(sb *spec.HostSandbox, what string) bool {
	return sb != nil && sb.Landlock != nil && slices.Contains(sb.Landlock.Scoped, what)
}

// notEnforcedHost are what a host run leaves open, beside what the engine
// says of the shared host netns.
var notEnforcedHost = []string{
	"UDP and ICMP from the command: only the table governs them (Landlock has no UDP rules at this ABI); TCP connects too, so that every denied attempt reaches the table's log",
	"TCP handshake replies (SYN-ACK) of a socket the command listens on: the kernel sends them without a socket the table attributes to the run's cgroup, so a peer that may reach the host reads a few bits from which ports the command listens on (a covert channel to the local network; IGMP and MLD reports are not sent: seccomp refuses the multicast joins)",
	"the size of the staged workspace: the command's writes land in the overlay's upper dir in the operation record, bounded only by the state dir's file system (no quota); a command that fills it fails its own writes and the gate's staging, and the manifest is written from space reserved before the command started",
	"flock(2) and fcntl(2) locks on host files the command can read: host processes see them (a one-bit channel to a host process that polls the lock, or a stall of one that waits on it for the run's length)",
	"pathname unix sockets outside /run, /var/run, /tmp, /var/tmp and /dev that were renamed or hard-linked after their bind (masked by the path they were bound at, which /proc/net/unix lists), bound relative to a cwd their holders have since left (resolved against a holder's cwd now), bound in another mount namespace at a path the host's view does not share, or bound after the run started: connect(2) is not a file open, so Landlock (ABI 7) does not see it; every other socket bound in any network namespace of this host when the run started is masked (the manifest's masked list names each path covered), and a FIFO outside the run's writable trees cannot be opened for writing (Landlock)",
}

// manifest is a host run's effect manifest (engine.Manifest) with what
// only a host run enforces: the dropped privileges, the sandbox's layers
// (hx.sandbox), the read-only workspace and its writable places.
func (r *run) manifest(x engine.Facts, hx hostExit) *spec.Manifest {
	d := engine.Door{Namespace: Namespace, ContainerID: r.id, Subject: "command", Admission: r.adm,
		Confined:    "it holds no capability in the host's user namespace, seccomp makes clone3 (CLONE_INTO_CGROUP) ENOSYS, and moving a process takes write access to a common ancestor's cgroup.procs, which is root's",
		NotEnforced: notEnforcedHost, ExecNoNewPrivileges: true,
		// The command runs as the invoking user with every set emptied.
		CapabilitiesRemoved: []string{"ALL (bounding, permitted, effective, inheritable, ambient)"},
		Host: &spec.HostRun{Runtime: Runtime, User: r.cmd.User.Name, UID: r.cmd.User.UID, GID: r.cmd.User.GID,
			Workspace: r.cmd.Workspace, Writable: hx.writables, NoNewPrivileges: true, Capabilities: []string{}, Sandbox: hx.sandbox}}
	if landlockScoped(hx.sandbox, "abstract_unix_socket") {
		d.AbstractUnix = spec.AbstractUnixLandlock
	}
	return engine.Manifest(r.store, d, x)
}
