package inner

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxFDLinks bounds the fd links hostSockets reads to find the holders of
// relative-bound sockets. BenchmarkHostSockets: 0.7 ms for a host of 70
// processes without one, 2 ms with one (about 3 µs a link), so the bound
// is about 0.4 s; the scan happens only when a relative-bound socket
// exists.
const maxFDLinks = 1 << 17

// hostSockets lists the bound pathname unix sockets of every network
// namespace on the host, read from procRoot (/proc/<pid>/net/unix of one
// process per namespace): a pathname socket is reachable by its path from
// any namespace, so the command's view masks each one that is not under a
// tree it covers whole.
//
// Paths are as their binder named them, when it bound them: a socket
// renamed or hard-linked since is listed at its old path (which then names
// no socket and is not masked), one bound in another mount namespace at a
// path the host's view does not share is not found. A path bound relative
// to the binder's cwd is resolved against the cwd of a process that holds
// the socket now (its inode among /proc/<pid>/fd), when that process is in
// the host's mount namespace (hostMnt, the parent's ns/mnt link) with the
// host's root; one whose binder has since changed directory resolves to
// the wrong path. The caller masks only paths that are sockets in its view.
func hostSockets(procRoot, hostMnt string) []string {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	nsOf := map[string]string{}                // pid → its net namespace
	relative := map[string]map[uint64]string{} // net namespace → inode → relative path
	var out []string
	for _, e := range ents {
		pid := e.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		ns, err := os.Readlink(procRoot + "/" + pid + "/ns/net")
		if err != nil {
			continue
		}
		nsOf[pid] = ns
		if seen[ns] {
			continue
		}
		seen[ns] = true
		for _, s := range unixSockets(procRoot + "/" + pid + "/net/unix") {
			if strings.HasPrefix(s.path, "/") {
				out = append(out, s.path)
				continue
			}
			if relative[ns] == nil {
				relative[ns] = map[uint64]string{}
			}
			relative[ns][s.inode] = s.path
		}
	}
	if len(relative) > 0 && hostMnt != "" {
		out = append(out, resolveRelative(procRoot, hostMnt, nsOf, relative)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveRelative finds, for each relative-bound socket, a process of its
// network namespace holding it, and joins the path to that process's cwd.
// It reads at most maxFDLinks fd links.
func resolveRelative(procRoot, hostMnt string, nsOf map[string]string, relative map[string]map[uint64]string) []string {
	var out []string
	budget := maxFDLinks
	pids := make([]string, 0, len(nsOf))
	for pid := range nsOf {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		want := relative[nsOf[pid]]
		if len(want) == 0 {
			continue
		}
		dir := procRoot + "/" + pid
		if l, err := os.Readlink(dir + "/ns/mnt"); err != nil || l != hostMnt {
			continue
		}
		if l, err := os.Readlink(dir + "/root"); err != nil || l != "/" {
			continue
		}
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if budget--; budget < 0 {
				return out
			}
			l, err := os.Readlink(dir + "/fd/" + fd.Name())
			ino, ok := socketInode(l)
			if err != nil || !ok {
				continue
			}
			rel, ok := want[ino]
			if !ok {
				continue
			}
			cwd, err := os.Readlink(dir + "/cwd")
			if err != nil || !strings.HasPrefix(cwd, "/") || strings.HasSuffix(cwd, " (deleted)") {
				continue
			}
			out = append(out, filepath.Join(cwd, rel))
			delete(want, ino)
		}
	}
	return out
}

// socketInode reads the inode of an fd link "socket:[N]".
func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// unixSocket is one bound pathname socket of a /proc/net/unix.
type unixSocket struct {
	inode uint64
	path  string // as bound: absolute, or relative to the binder's cwd then
}

// unixSockets reads the pathname sockets of one /proc/net/unix:
// "Num RefCount Protocol Flags Type St Inode Path", the path last (absent
// for unbound sockets, '@'-prefixed for abstract ones).
func unixSockets(file string) []unixSocket {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []unixSocket
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		rest := sc.Text()
		var fields [7]string
		for i := range fields {
			rest = strings.TrimLeft(rest, " ")
			j := strings.IndexByte(rest, ' ')
			if j < 0 {
				fields[i], rest = rest, ""
				break
			}
			fields[i], rest = rest[:j], rest[j:]
		}
		p := strings.TrimLeft(rest, " ")
		ino, err := strconv.ParseUint(fields[6], 10, 64)
		if p == "" || strings.HasPrefix(p, "@") || err != nil {
			continue
		}
		out = append(out, unixSocket{inode: ino, path: p})
	}
	return out
}
