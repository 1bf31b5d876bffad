package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// Socket families and protocols the probe tries (linux/socket.h, netlink.h).
const (
	afKey           = 15
	afBluetooth     = 31
	afVsock         = 40
	afXDP           = 44
	netlinkNetfilt  = 12
	sysIOUringSetup = 425
)

// openSocket opens one socket of kind and closes it.
func openSocket(kind string) error {
	var fam, typ, proto int
	switch kind {
	case "packet":
		fam, typ, proto = syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300
	case "raw4":
		fam, typ, proto = syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP
	case "vsock":
		fam, typ = afVsock, syscall.SOCK_STREAM
	case "xdp":
		fam, typ = afXDP, syscall.SOCK_RAW
	case "key":
		fam, typ, proto = afKey, syscall.SOCK_RAW, 2
	case "bluetooth":
		fam, typ = afBluetooth, syscall.SOCK_RAW
	case "nfnetlink":
		fam, typ, proto = syscall.AF_NETLINK, syscall.SOCK_RAW, netlinkNetfilt
	case "rtnetlink":
		fam, typ, proto = syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_ROUTE
	case "inet":
		fam, typ = syscall.AF_INET, syscall.SOCK_STREAM
	case "unix":
		fam, typ = syscall.AF_UNIX, syscall.SOCK_STREAM
	case "iouring":
		var params [120]byte
		fd, _, errno := syscall.Syscall(sysIOUringSetup, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		if errno != 0 {
			return fmt.Errorf("io_uring_setup: %w", errno)
		}
		syscall.Close(int(fd))
		return nil
	default:
		usage()
	}
	fd, err := syscall.Socket(fam, typ, proto)
	if err != nil {
		return fmt.Errorf("socket %s: %w", kind, err)
	}
	syscall.Close(fd)
	return nil
}

// cgmove moves the probe into the cgroup at dir.
func cgmove(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
}

// rewrite replaces path's bytes with text of the same length and puts the
// old size and mtime back, as a workload hiding a change would.
func rewrite(path, text string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if int64(len(text)) != fi.Size() {
		return fmt.Errorf("%s has %d bytes; give %d", path, fi.Size(), fi.Size())
	}
	if err := os.WriteFile(path, []byte(text), fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(path, time.Now(), fi.ModTime())
}

// nestedConnect runs "probe connect" in a child made in a new user and
// network namespace (root inside the nested user namespace holds every
// capability over the namespaces it creates, none over its parent's).
func nestedConnect(proto, addr string) error {
	cmd := exec.Command("/proc/self/exe", "connect", proto, addr)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nested: %w", err)
	}
	return nil
}

// serve answers "pong\n" to every TCP connection on each port, forever.
func serve(ports []string) error {
	errc := make(chan error, len(ports))
	for _, p := range ports {
		ln, err := net.Listen("tcp", ":"+p)
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				c.Write([]byte("pong\n"))
				c.Close()
			}
		}()
	}
	return <-errc
}

// udpEcho sends every datagram arriving on port back to its source.
func udpEcho(port string) error {
	pc, err := net.ListenPacket("udp", ":"+port)
	if err != nil {
		return err
	}
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		pc.WriteTo(buf[:n], from)
	}
}

// cgclone starts a child directly in the cgroup at dir
// (clone3 CLONE_INTO_CGROUP, which checks write access to cgroup.procs of
// the common ancestor but not the mount the fd came through: a read-only
// mount does not stop it). The child exits at once; the probe succeeds
// when the kernel accepted the move.
func cgclone(dir string) error {
	const (
		sysClone3       = 435
		cloneIntoCgroup = 0x200000000
	)
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct clone_args (CLONE_ARGS_SIZE_VER2): flags, pidfd, child_tid,
	// parent_tid, exit_signal, stack, stack_size, tls, set_tid,
	// set_tid_size, cgroup.
	var args [11]uint64
	args[0] = cloneIntoCgroup
	args[4] = uint64(syscall.SIGCHLD)
	args[10] = uint64(fd)
	syscall.ForkLock.Lock()
	pid, _, errno := syscall.RawSyscall(sysClone3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if errno == 0 && pid == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0) // the child: nothing of Go's runtime is safe here
	}
	syscall.ForkLock.Unlock()
	if errno != 0 {
		return fmt.Errorf("clone3 into %s: %w", dir, errno)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(int(pid), &ws, 0, nil)
	return nil
}
