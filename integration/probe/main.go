// Command probe runs inside test containers and reports what the boundary
// let it do, through its exit status: 0 the action succeeded, 1 it was
// refused or failed, 2 usage. It is built static and placed in the test image.
//
//	probe connect tcp|udp HOST:PORT   connect (udp: send one datagram and await a reply)
//	probe ping4|ping6 ADDR            one ICMP echo over an unprivileged ICMP socket
//	probe packet                      open an AF_PACKET socket
//	probe write PATH TEXT             write a file
//	probe flood udp HOST:PORT N       send N datagrams as fast as possible (exit 0 whatever happens)
//	probe sleep SECONDS
//	probe socket KIND                 open a socket: packet, raw4, vsock, xdp, key, bluetooth, nfnetlink, rtnetlink, inet, unix, iouring
//	probe cgmove DIR                  write the probe's pid into DIR/cgroup.procs
//	probe cgmove-connect DIR tcp|udp HOST:PORT   cgmove, then connect
//	probe cgclone DIR                 start a child in the cgroup at DIR (clone3 CLONE_INTO_CGROUP)
//	probe nested-connect tcp|udp HOST:PORT  connect from a child in a new user+network namespace
//	probe serve PORT...               answer "pong" to every TCP connection on each port (until killed)
//	probe rewrite PATH TEXT           write TEXT over PATH (same length) and restore its size and mtime
//	probe hold tcp|udp HOST:PORT SECONDS  connect, send one line, and keep the connection open
//	probe udpecho PORT                send every datagram to PORT back to its source (until killed)
//	probe srcroute KIND,FIRST,FINAL:PORT  one source-routed datagram (lsrr, ssrr: IPv4 option; rt6: IPv6 routing header)
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/gensee/gensee/internal/pktprobe"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "connect":
		if len(os.Args) != 4 {
			usage()
		}
		err = connect(os.Args[2], os.Args[3])
	case "ping4", "ping6":
		if len(os.Args) != 3 {
			usage()
		}
		err = ping(os.Args[1] == "ping6", os.Args[2])
	case "packet":
		var fd int
		fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300)
		if err == nil {
			syscall.Close(fd)
		}
	case "write":
		if len(os.Args) != 4 {
			usage()
		}
		err = os.WriteFile(os.Args[2], []byte(os.Args[3]), 0o644)
	case "flood":
		if len(os.Args) != 5 {
			usage()
		}
		n, _ := strconv.Atoi(os.Args[4])
		flood(os.Args[2], os.Args[3], n)
	case "socket":
		if len(os.Args) != 3 {
			usage()
		}
		err = openSocket(os.Args[2])
	case "cgmove":
		if len(os.Args) != 3 {
			usage()
		}
		err = cgmove(os.Args[2])
	case "cgclone":
		if len(os.Args) != 3 {
			usage()
		}
		err = cgclone(os.Args[2])
	case "cgmove-connect":
		if len(os.Args) != 5 {
			usage()
		}
		if err = cgmove(os.Args[2]); err == nil {
			err = connect(os.Args[3], os.Args[4])
		}
	case "nested-connect":
		if len(os.Args) != 4 {
			usage()
		}
		err = nestedConnect(os.Args[2], os.Args[3])
	case "serve":
		if len(os.Args) < 3 {
			usage()
		}
		err = serve(os.Args[2:])
	case "hold":
		if len(os.Args) != 5 {
			usage()
		}
		n, _ := strconv.Atoi(os.Args[4])
		err = hold(os.Args[2], os.Args[3], time.Duration(n)*time.Second)
	case "udpecho":
		if len(os.Args) != 3 {
			usage()
		}
		err = udpEcho(os.Args[2])
	case "srcroute":
		if len(os.Args) != 3 {
			usage()
		}
		err = pktprobe.SourceRouted(os.Args[2])
	case "rewrite":
		if len(os.Args) != 4 {
			usage()
		}
		err = rewrite(os.Args[2], os.Args[3])
	case "sleep":
		n, _ := strconv.Atoi(os.Args[2])
		time.Sleep(time.Duration(n) * time.Second)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	fmt.Println("probe: ok")
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe connect tcp|udp HOST:PORT | ping4|ping6 ADDR | packet | write PATH TEXT | sleep N")
	os.Exit(2)
}

func connect(proto, addr string) error {
	c, err := net.DialTimeout(proto, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("probe\n")); err != nil {
		return err
	}
	if proto == "udp" {
		buf := make([]byte, 64)
		_, err = c.Read(buf)
		return err
	}
	return nil
}

// hold connects, sends one line and keeps the connection open for d.
func hold(proto, addr string, d time.Duration) error {
	c, err := net.DialTimeout(proto, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("probe\n")); err != nil {
		return err
	}
	time.Sleep(d)
	return nil
}

// ping sends one echo request on a datagram ICMP socket (no CAP_NET_RAW
// needed when ping_group_range allows it) and waits for the reply.
func ping(v6 bool, addr string) error {
	fam, proto, typ := syscall.AF_INET, syscall.IPPROTO_ICMP, byte(8)
	if v6 {
		fam, proto, typ = syscall.AF_INET6, syscall.IPPROTO_ICMPV6, byte(128)
	}
	fd, err := syscall.Socket(fam, syscall.SOCK_DGRAM, proto)
	if err != nil {
		return fmt.Errorf("icmp socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "icmp")
	defer f.Close()
	conn, err := net.FilePacketConn(f)
	if err != nil {
		return err
	}
	defer conn.Close()
	ip := net.ParseIP(addr)
	var dst net.Addr = &net.UDPAddr{IP: ip}
	if _, err := conn.WriteTo([]byte{typ, 0, 0, 0, 0, 1, 0, 1, 'p'}, dst); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 128)
	_, _, err = conn.ReadFrom(buf)
	return err
}

// flood sends n datagrams; send errors (a local drop reports EPERM) are
// ignored, so every one of them reaches the table.
func flood(proto, addr string, n int) {
	c, err := net.Dial(proto, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
	defer c.Close()
	for i := 0; i < n; i++ {
		c.Write([]byte("flood"))
	}
}
