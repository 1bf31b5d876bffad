// Package pktprobe sends the packets the network tests need a workload
// (or an attacker in a test's own namespace) to send: datagrams from
// forged sources and source-routed datagrams, set the way a process does
// it with socket options. Tests and the integration probe binary use it;
// the product does not.
package pktprobe

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// SpoofUDP sends one datagram per step of steps ("SRC>DST,SRC>DST", each
// an address:port) from a fresh socket bound to SRC. IPv6 sources use
// IPV6_FREEBIND, which needs no privilege; the kernel refuses a foreign
// IPv4 source to a freebind socket, so IPv4 sources use IP_TRANSPARENT
// (CAP_NET_ADMIN; a raw IP_HDRINCL socket, CAP_NET_RAW, gets the same). A
// step the table drops fails its sendto with EPERM: reported, not an error.
func SpoofUDP(steps string) error {
	for _, step := range strings.Split(steps, ",") {
		s, d, ok := strings.Cut(step, ">")
		src, err1 := netip.ParseAddrPort(s)
		dst, err2 := netip.ParseAddrPort(d)
		if !ok || err1 != nil || err2 != nil || src.Addr().Is4() != dst.Addr().Is4() {
			return fmt.Errorf("spoof step %q: want SRC>DST of one family", step)
		}
		err := SpoofOne(src, dst)
		if err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("spoof %s: %w", step, err)
		}
		fmt.Printf("%s: %v\n", step, err)
	}
	return nil
}

// SpoofOne sends one datagram from src, an address the namespace need
// not own, to dst.
func SpoofOne(src, dst netip.AddrPort) error {
	sa := func(a netip.AddrPort) unix.Sockaddr {
		if a.Addr().Is4() {
			return &unix.SockaddrInet4{Addr: a.Addr().As4(), Port: int(a.Port())}
		}
		return &unix.SockaddrInet6{Addr: a.Addr().As16(), Port: int(a.Port())}
	}
	af, level, opt := unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
	if src.Addr().Is4() {
		af, level, opt = unix.AF_INET, unix.IPPROTO_IP, unix.IP_TRANSPARENT
	}
	fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, level, opt, 1); err != nil {
		return fmt.Errorf("setsockopt %d: %w", opt, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if err := unix.Bind(fd, sa(src)); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return unix.Sendto(fd, []byte("gensee-spoofed "+src.String()), 0, sa(dst))
}

// SourceRouted sends one datagram as target "KIND,FIRST,FINAL:PORT" says: KIND
// lsrr or ssrr (an IPv4 option) or rt6 (an IPv6 segment routing header,
// type 4), through FIRST to FINAL. The kernel addresses the packet to
// FIRST. It returns sendto's error: EPERM when the table drops it.
func SourceRouted(target string) error {
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
		ty := byte(131) // IPOPT_LSRR, RFC 791
		if parts[0] == "ssrr" {
			ty = 137 // IPOPT_SSRR
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
