package analyzer

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// checkPeer says why conn's peer may not answer for an analyzer, or "":
// the process that created the listening socket (SO_PEERCRED, recorded by
// the kernel at listen(2), not a claim of the peer) must run as root or as
// the runtime's own effective uid. Anyone else who could bind the
// endpoint's path (a directory they can write) could otherwise feed the
// runtime answers; the signature check would still catch a forged
// inference, but not a replayed one, nor the timing and content of
// no-class answers.
func (c Client) checkPeer(conn *net.UnixConn) string {
	raw, err := conn.SyscallConn()
	if err != nil {
		return "read the socket's peer: " + err.Error()
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return "read the socket's peer: " + err.Error()
	}
	if credErr != nil {
		return "read the socket's peer (SO_PEERCRED): " + credErr.Error()
	}
	if cred.Uid != 0 && cred.Uid != c.euid {
		return fmt.Sprintf("the process serving the socket (pid %d) runs as uid %d, neither root nor the runtime's uid %d: run the analyzer as root",
			cred.Pid, cred.Uid, c.euid)
	}
	return ""
}
