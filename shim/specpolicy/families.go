package specpolicy

import "slices"

// The socket rule of seccomp.go, exported so a host run (shim/sandbox) refuses
// exactly what a container's profile refuses: one allowlist for both.

// AFNetlink and NetlinkNetfilter are AF_NETLINK and its protocol the boundary
// refuses (nfnetlink: nftables, conntrack, nflog, queue).
const (
	AFNetlink        = afNetlink
	NetlinkNetfilter = netlinkNetfilter
)

// AllowedSocketFamilies returns the socket families a process under the
// boundary may create, ascending; AF_NETLINK only without NETLINK_NETFILTER.
// A copy: callers cannot change the containers' rule.
func AllowedSocketFamilies() []uint64 { return slices.Clone(allowedFamilies) }

// SocketFamilyName is include/linux/socket.h's name of family af, or "" for
// one at or above AF_MAX.
func SocketFamilyName(af uint64) string {
	if af >= afMax {
		return ""
	}
	return familyNames[af]
}

// RefusedSyscalls returns the syscalls the boundary refuses with EPERM
// whatever their arguments (a copy). Some, such as socketcall, exist only on
// some architectures.
func RefusedSyscalls() []string { return slices.Clone(refusedSyscalls) }
