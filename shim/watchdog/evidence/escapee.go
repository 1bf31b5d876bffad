package evidence

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/netpolicy"
)

// An escaped process (found outside the bound cgroup) sends past the
// cgroup's rules in a shared namespace, and conntrack, which names no
// process, tracks a namespace only while some rule there uses it. So the
// flow poller also reads the escapees' own sockets from /proc: each
// socket inode the process holds (/proc/<pid>/fd), matched against the
// connected TCP and UDP sockets of its namespace (/proc/<pid>/net/tcp,
// tcp6, udp, udp6). A connection to a watched target is the escaped
// process reaching it: attributed by pid, not by address alone.

// socketConn is a connected socket: its peer, as a target.
type socketConn struct {
	inode  uint64
	target netpolicy.Tuple
}

// escapeeConns lists the connected sockets process pr holds; it returns
// nothing when pr is gone or its pid now names another process.
func escapeeConns(pr cgroup.Proc) []socketConn {
	inodes := socketInodes(pr.PID)
	if len(inodes) == 0 {
		return nil
	}
	var out []socketConn
	base := filepath.Join("/proc", strconv.Itoa(pr.PID), "net")
	for _, t := range []struct {
		file  string
		proto uint8
	}{{"tcp", netpolicy.ProtoTCP}, {"tcp6", netpolicy.ProtoTCP}, {"udp", netpolicy.ProtoUDP}, {"udp6", netpolicy.ProtoUDP}} {
		b, err := os.ReadFile(filepath.Join(base, t.file))
		if err != nil {
			continue
		}
		for _, c := range parseProcNet(b, t.proto) {
			if inodes[c.inode] {
				out = append(out, c)
			}
		}
	}
	// The pid may have been reused while its files were read.
	if st, err := cgroup.ReadStat(pr.PID); err != nil || st.Start != pr.Start {
		return nil
	}
	return out
}

// socketInodes is the set of socket inodes pid holds open.
func socketInodes(pid int) map[uint64]bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(l, "socket:[") || !strings.HasSuffix(l, "]") {
			continue
		}
		if n, err := strconv.ParseUint(l[len("socket:["):len(l)-1], 10, 64); err == nil {
			out[n] = true
		}
	}
	return out
}

// answered are the TCP states (as /proc/net/tcp prints them) of a
// connection the peer answered: established, and the closing states that
// follow it. A connection reset or fully closed is no longer listed: a
// poll that comes after it sees nothing (conntrack may).
var answered = map[string]bool{"01": true, "04": true, "05": true, "08": true, "09": true, "0B": true}

// parseProcNet reads /proc/net/{tcp,udp}[6]: the sockets with a peer
// (TCP answered, UDP connected: remote port not 0).
func parseProcNet(b []byte, proto uint8) []socketConn {
	var out []socketConn
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		if proto == netpolicy.ProtoTCP && !answered[f[3]] {
			continue
		}
		peer, err := parseHexAddrPort(f[2])
		if err != nil || peer.Port() == 0 || peer.Addr().IsUnspecified() {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		out = append(out, socketConn{inode: inode, target: netpolicy.Tuple{Addr: peer.Addr().Unmap(), Proto: proto, Port: peer.Port()}})
	}
	return out
}

// parseHexAddrPort reads "0100007F:1F90" (IPv4) or 32 hex digits and a
// port (IPv6): the address as the kernel's words in host byte order.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", a)
	}
	// Each 32-bit word was printed as a host-order integer.
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}
