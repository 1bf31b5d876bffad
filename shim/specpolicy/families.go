package specpolicy

import "slices"

// The socket rule of seccomp.go, exported so a host run (shim/sandbox) refuses
// exactly what a container's profile refuses: one allowlist for both.

// AFNetlink is AF_NETLINK, whose protocols have their own allowlist.
const AFNetlink = afNetlink

// AllowedSocketFamilies returns the socket families a process under the
// boundary may create, ascending; AF_NETLINK only with a protocol of
// AllowedNetlinkProtocols. A copy: callers cannot change the containers' rule.
func AllowedSocketFamilies() []uint64 { return slices.Clone(allowedFamilies) }

// AllowedNetlinkProtocols returns the AF_NETLINK protocols a process under
// the boundary may open, ascending (a copy); every other one, among them
// NETLINK_USERSOCK and NETLINK_NETFILTER, gets EPERM.
func AllowedNetlinkProtocols() []uint64 { return slices.Clone(allowedNetlink) }

// NetlinkProtocolName is the name of an allowed netlink protocol, else "".
func NetlinkProtocolName(p uint64) string { return netlinkNames[p] }

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
