package engine

import "github.com/gensee/gensee/spec"

// NotEnforcedAbstractUnix is the manifest's not_enforced line for a subject
// ("container", "command") that shares network namespace netns ("host",
// "pod", a path) with others: abstract AF_UNIX sockets (@name) belong to
// the namespace, and no nftables hook sees them, so the table cannot stop
// the subject from reaching a listener on one. A namespace of the subject's
// own (netns scope) has no such listener but the subject's.
func NotEnforcedAbstractUnix(subject string, netns spec.NetnsKind) string {
	return "abstract AF_UNIX sockets: the " + subject + " shares the " + string(netns) +
		" network namespace, whose abstract socket names (@name) nftables cannot see; a process there listening on one is reachable from the " + subject
}

// NotEnforcedOutsideCgroup is the not_enforced sentence for a subject in a
// shared netns (netns), whose table matches its cgroup only; confined says
// why the subject itself cannot leave the cgroup ("" when that is not
// claimed).
func NotEnforcedOutsideCgroup(subject string, netns spec.NetnsKind, confined string) string {
	s := "processes outside the bound cgroup: in the shared " + string(netns) + " netns the table matches the " + subject + "'s cgroup; "
	if confined != "" {
		s += "the " + subject + " cannot leave it (" + confined + "), but "
	}
	return s + "a process the host moves out is found by polling (policy_unbound, observation.escapes), not stopped; the poll looks every 0.5 s, so one that leaves, sends and exits between two looks is not seen, and escape_detected is absent then"
}
