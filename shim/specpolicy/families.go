package specpolicy

import "github.com/gensee/gensee/shim/sockrule"

// The socket rule of seccomp.go is shim/sockrule's; these delegate to it so
// callers of this package keep one name for it.

// AFNetlink is AF_NETLINK, whose protocols have their own allowlist.
const AFNetlink = sockrule.AFNetlink

// AllowedSocketFamilies is sockrule.AllowedSocketFamilies.
func AllowedSocketFamilies() []uint64 { return sockrule.AllowedSocketFamilies() }

// AllowedNetlinkProtocols is sockrule.AllowedNetlinkProtocols.
func AllowedNetlinkProtocols() []uint64 { return sockrule.AllowedNetlinkProtocols() }

// NetlinkProtocolName is sockrule.NetlinkProtocolName.
func NetlinkProtocolName(p uint64) string { return sockrule.NetlinkProtocolName(p) }

// SocketFamilyName is sockrule.SocketFamilyName.
func SocketFamilyName(af uint64) string { return sockrule.SocketFamilyName(af) }

// RefusedSyscalls is sockrule.RefusedSyscalls.
func RefusedSyscalls() []string { return sockrule.RefusedSyscalls() }
