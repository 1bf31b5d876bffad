// Package integration holds the end-to-end tests of gensee: a private
// containerd v2.4 (own root, state and sockets; the gensee runtime first on
// its PATH), real runc, real nftables and cgroup v2, a test image built from
// Debian's busybox-static and imported without a registry. Tests leave
// nothing running, mounted or installed, pass or fail.
package integration
