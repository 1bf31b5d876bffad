package netpolicy

// The source-routing probe: one UDP datagram whose header names a first
// hop ahead of its destination, set the way a workload does it without any
// capability (IP_OPTIONS, IPV6_RTHDR).

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// srcRouted sends one datagram as target "KIND,FIRST,FINAL:PORT" says: KIND
// lsrr or ssrr (an IPv4 option) or rt6 (an IPv6 segment routing header,
// type 4), through FIRST to FINAL. The kernel addresses the packet to
// FIRST. It returns sendto's error: EPERM when the table drops it.
func srcRouted(target string) error {
	parts := strings.Split(target, ",")
	if len(parts) != 3 {
		return fmt.Errorf("srcroute %q: want KIND,FIRST,FINAL:PORT", target)
	}
	first, err := netip.ParseAddr(parts[1])
	if err != nil {
		return err
	}
	final, err := netip.ParseAddrPort(parts[2])
	if err != nil {
		return err
	}
	switch parts[0] {
	case "lsrr", "ssrr":
		ty := byte(ipoptLSRR)
		if parts[0] == "ssrr" {
			ty = ipoptSSRR
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// NOP, then {type, length 7, pointer 4, first hop}: the kernel
		// takes the first address as the next hop and appends FINAL.
		f := first.As4()
		opt := []byte{1, ty, 7, 4, f[0], f[1], f[2], f[3]}
		if err := unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, string(opt)); err != nil {
			return fmt.Errorf("setsockopt IP_OPTIONS: %w", err)
		}
		return unix.Sendto(fd, []byte("gensee-srcroute"), 0, &unix.SockaddrInet4{Addr: final.Addr().As4(), Port: int(final.Port())})
	case "rt6":
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Segment routing header (RFC 8754): next header (the kernel's),
		// length 4 (two segments), type 4, segments left 1, last entry
		// 1, flags, tag; segment 0 is FINAL (the kernel writes it),
		// segment 1 the first hop.
		h := []byte{0, 4, 4, 1, 1, 0, 0, 0}
		h = append(h, make([]byte, 16)...)
		f := first.As16()
		h = append(h, f[:]...)
		if err := unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(h)); err != nil {
			return fmt.Errorf("setsockopt IPV6_RTHDR: %w", err)
		}
		return unix.Sendto(fd, []byte("gensee-srcroute"), 0, &unix.SockaddrInet6{Addr: final.Addr().As16(), Port: int(final.Port())})
	}
	return fmt.Errorf("srcroute kind %q: want lsrr, ssrr or rt6", parts[0])
}
