package hostrun

import (
	"bufio"
	"os"
	"slices"
	"strings"
)

// hostSockets lists the bound pathname unix sockets of every network
// namespace on the host, read from procRoot (/proc/<pid>/net/unix of one
// process per namespace): a pathname socket is reachable by its path from
// any namespace, so the command's view masks each one that is not under a
// tree it covers whole. Paths are as their binder named them (in its own
// mount namespace); one that names no socket in the host's view is
// skipped by the masking.
func hostSockets(procRoot string) []string {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range ents {
		pid := e.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		ns, err := os.Readlink(procRoot + "/" + pid + "/ns/net")
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		out = append(out, unixSocketPaths(procRoot+"/"+pid+"/net/unix")...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unixSocketPaths reads the pathname sockets of one /proc/net/unix:
// "Num RefCount Protocol Flags Type St Inode Path", the path last (absent
// for unbound sockets, '@'-prefixed for abstract ones).
func unixSocketPaths(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		line := sc.Text()
		rest := line
		for i := 0; i < 7; i++ {
			rest = strings.TrimLeft(rest, " ")
			j := strings.IndexByte(rest, ' ')
			if j < 0 {
				rest = ""
				break
			}
			rest = rest[j:]
		}
		if p := strings.TrimLeft(rest, " "); strings.HasPrefix(p, "/") {
			out = append(out, p)
		}
	}
	return out
}
