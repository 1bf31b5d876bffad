// Package sockrule is the socket rule every process under a gensee
// boundary gets, containers (shim/specpolicy merges it into the OCI
// seccomp profile runc applies) and host runs (shim/sandbox compiles it
// into the stage's filter) alike: which socket families and AF_NETLINK
// protocols may be created, and the syscalls refused whatever their
// arguments. It is data only, with no dependency beyond the standard
// library, so the small host-run sandbox binary carries it without the
// shim's; it must never grow a second copy elsewhere.
package sockrule

import "slices"

// Socket families are an allowlist: AF_UNIX, AF_INET and AF_INET6 (what the
// nftables table governs, or local IPC) and AF_NETLINK (of the protocols in
// allowedNetlink only). Every other family of include/linux/socket.h
// gets EPERM: AF_PACKET, AF_XDP and AF_VSOCK move packets or host/guest
// bytes past the inet hooks, and families such as AF_RDS or AF_TIPC send
// through kernel sockets of the root cgroup, which a cgroup-scoped rule
// never matches. Families above AF_MAX fail in the kernel today.
var allowedFamilies = []uint64{1, 2, 10, AFNetlink}

// FamilyNames are include/linux/socket.h's AF_ names, by number.
var FamilyNames = [AFMax]string{
	"AF_UNSPEC", "AF_UNIX", "AF_INET", "AF_AX25", "AF_IPX", "AF_APPLETALK", "AF_NETROM", "AF_BRIDGE",
	"AF_ATMPVC", "AF_X25", "AF_INET6", "AF_ROSE", "AF_DECnet", "AF_NETBEUI", "AF_SECURITY", "AF_KEY",
	"AF_NETLINK", "AF_PACKET", "AF_ASH", "AF_ECONET", "AF_ATMSVC", "AF_RDS", "AF_SNA", "AF_IRDA",
	"AF_PPPOX", "AF_WANPIPE", "AF_LLC", "AF_IB", "AF_MPLS", "AF_CAN", "AF_TIPC", "AF_BLUETOOTH",
	"AF_IUCV", "AF_RXRPC", "AF_ISDN", "AF_PHONET", "AF_IEEE802154", "AF_CAIF", "AF_ALG", "AF_NFC",
	"AF_VSOCK", "AF_KCM", "AF_QIPCRTR", "AF_SMC", "AF_XDP", "AF_MCTP",
}

// AF_NETLINK's protocols are an allowlist too: those a build's tools use,
// none of which carries a message from one process to another. Only a
// protocol registered with NL_CFG_F_NONROOT_SEND lets a sender without
// CAP_NET_ADMIN unicast to another socket's port id (or a group); in
// mainline that is NETLINK_USERSOCK alone (af_netlink.c), which reaches any
// process of the network namespace that bound one, past every nftables
// hook. Out-of-tree modules may register others. NETLINK_NETFILTER
// (nftables, conntrack, nflog, queue) stays refused as it always was.
var allowedNetlink = []uint64{
	0,  // NETLINK_ROUTE: ip, getifaddrs
	4,  // NETLINK_SOCK_DIAG (NETLINK_INET_DIAG): ss
	15, // NETLINK_KOBJECT_UEVENT: udev monitors (receive only without CAP_NET_ADMIN)
	16, // NETLINK_GENERIC: nl80211, taskstats, ethtool
}

// netlinkNames are include/uapi/linux/netlink.h's names of the allowed
// protocols, for the records.
var netlinkNames = map[uint64]string{0: "NETLINK_ROUTE", 4: "NETLINK_SOCK_DIAG", 15: "NETLINK_KOBJECT_UEVENT", 16: "NETLINK_GENERIC"}

const (
	AFNetlink        = 16
	NetlinkNetfilter = 12 // NETLINK_NETFILTER: nfnetlink, i.e. nftables, conntrack, nflog, queue
	AFMax            = 46 // AF_MAX of include/linux/socket.h (Linux 6.x); higher families fail in the kernel
	NetlinkMaxLinks  = 32 // MAX_LINKS of include/uapi/linux/netlink.h
)

// refusedSyscalls get EPERM unconditionally. io_uring's IORING_OP_SOCKET creates sockets
// without socket(2), past the family rules. socketcall(2) is how 32-bit x86 makes
// sockets: its arguments sit behind a pointer seccomp cannot read, so no family rule can
// apply to it (it does not exist on x86_64, x32 or arm64, where runc skips the name).
var refusedSyscalls = []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "socketcall"}

// AllowedSocketFamilies returns the socket families a process under the
// boundary may create, ascending; AF_NETLINK only with a protocol of
// AllowedNetlinkProtocols. A copy: callers cannot change the rule.
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
	if af >= AFMax {
		return ""
	}
	return FamilyNames[af]
}

// RefusedSyscalls returns the syscalls the boundary refuses with EPERM
// whatever their arguments (a copy). Some, such as socketcall, exist only on
// some architectures.
func RefusedSyscalls() []string { return slices.Clone(refusedSyscalls) }
