// Package netpolicy owns a container's network authority: it turns the
// network section of an admitted contract into a Plan (pure, validated, no
// side effects), installs that plan as one nftables table in the network
// namespace where the container's sockets live (one netlink batch), reads the
// table back and compares it to the plan, reads its counters, and removes it.
//
// The table filters only sockets of the container's cgroup v2 subtree
// (`socket cgroupv2 level N @cg`), so other cgroups sharing the namespace are
// untouched. Rules are positive matches followed by an explicit drop; it must
// never express policy with `!=` on the socket match, because the kernel
// answers NFT_BREAK (rule skipped) for sockets it cannot attribute.
//
// It never touches a table whose name does not start with "gensee_", never
// resolves host names, never widens or narrows a contract's tuples, and never
// flushes conntrack in the caller's own (host) namespace.
package netpolicy
