package netpolicy

// The spoofing probe: UDP datagrams from a source address the namespace
// does not own, the way a workload gets them out without privilege.

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// spoofUDP sends one datagram per step of steps ("SRC>DST,SRC>DST", each
// an address:port) from a fresh socket bound to SRC. IPv6 sources use
// IPV6_FREEBIND, which needs no privilege; the kernel refuses a foreign
// IPv4 source to a freebind socket, so IPv4 sources use IP_TRANSPARENT
// (CAP_NET_ADMIN; a raw IP_HDRINCL socket, CAP_NET_RAW, gets the same). A
// step the table drops fails its sendto with EPERM: reported, not an error.
func spoofUDP(steps string) error {
	for _, step := range strings.Split(steps, ",") {
		s, d, ok := strings.Cut(step, ">")
		src, err1 := netip.ParseAddrPort(s)
		dst, err2 := netip.ParseAddrPort(d)
		if !ok || err1 != nil || err2 != nil || src.Addr().Is4() != dst.Addr().Is4() {
			return fmt.Errorf("spoof step %q: want SRC>DST of one family", step)
		}
		err := spoofOne(src, dst)
		if err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("spoof %s: %w", step, err)
		}
		fmt.Printf("%s: %v\n", step, err)
	}
	return nil
}

func spoofOne(src, dst netip.AddrPort) error {
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
