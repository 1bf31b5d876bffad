// Command sockprobe runs inside a test container: it makes the socket(2) and io_uring
// calls the boundary's seccomp rules govern and prints one "name=result" line each.
// With -check it exits 1 unless every refused call failed with EPERM and every allowed
// call succeeded.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

type probe struct {
	name string
	want string // "EPERM", "ok", or "" (report only)
	call func() error
}

func sock(family, typ, proto int) func() error {
	return func() error {
		fd, err := unix.Socket(family, typ, proto)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
}

func main() {
	check := flag.Bool("check", false, "exit 1 unless results match the boundary policy")
	allowedWant := flag.String("allowed", "ok", "expected result of allowed calls")
	flag.Parse()
	probes := []probe{
		{"af_packet", "EPERM", sock(unix.AF_PACKET, unix.SOCK_RAW, 0)},
		{"af_vsock", "EPERM", sock(unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
		{"af_xdp", "EPERM", sock(unix.AF_XDP, unix.SOCK_RAW, 0)},
		{"af_key", "EPERM", sock(unix.AF_KEY, unix.SOCK_RAW, 2)},
		{"af_bluetooth", "EPERM", sock(unix.AF_BLUETOOTH, unix.SOCK_RAW, 0)},
		{"netlink_netfilter", "EPERM", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER)},
		{"netlink_usersock", "EPERM", sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_USERSOCK)},
		{"io_uring_setup", "EPERM", func() error {
			var params [120]byte
			_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
			if e != 0 {
				return e
			}
			return nil
		}},
		{"af_inet", *allowedWant, sock(unix.AF_INET, unix.SOCK_STREAM, 0)},
		{"af_unix", *allowedWant, sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)},
		{"netlink_route", *allowedWant, sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)},
	}
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		// The kernel reads the family as a C int: a high bit must not slip past a rule.
		probes = append(probes, probe{"af_packet_high_bits", "EPERM", func() error {
			high := uint64(1)<<32 | unix.AF_PACKET
			fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(high), unix.SOCK_RAW, 0)
			if e != 0 {
				return e
			}
			unix.Close(int(fd))
			return nil
		}})
	}
	bad := 0
	for _, p := range probes {
		got := "ok"
		if err := p.call(); err != nil {
			var errno unix.Errno
			if errors.As(err, &errno) {
				got = unix.ErrnoName(errno)
			} else {
				got = err.Error()
			}
		}
		mark := ""
		if *check && p.want != "" && got != p.want {
			mark = " MISMATCH want " + p.want
			bad++
		}
		fmt.Printf("%s/%s=%s%s\n", runtime.GOARCH, p.name, got, mark)
	}
	if bad > 0 {
		os.Exit(1)
	}
}
