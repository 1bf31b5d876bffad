package cgroup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PathOf returns the cgroup v2 path of pid ("/a/b", the "0::" line of
// /proc/<pid>/cgroup), relative to the caller's cgroup namespace.
func PathOf(pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("cgroup of pid %d: not a process id", pid)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	defer f.Close()
	p, err := ParseProcCgroup(f)
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	return p, nil
}

// ParseProcCgroup returns the cgroup v2 path from a /proc/<pid>/cgroup table.
func ParseProcCgroup(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			// A path outside the reader's cgroup namespace shows as
			// "/../x": refuse it rather than guess.
			if !strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
				return "", fmt.Errorf("cgroup v2 path %q is not below this cgroup namespace: run in the init cgroup namespace", p)
			}
			return p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New(`no cgroup v2 ("0::") line: the process is not in a cgroup v2 hierarchy`)
}

// Level is the depth of cgroup path p below the caller's cgroup namespace
// root: "/" is 0, "/a" is 1, "/a/b" is 2. It is the level `socket cgroupv2
// level N` takes; kernels with commit 7f3287db6543 add the loader's own
// cgroup-namespace depth, so a path read by the loader yields the right rule.
func Level(p string) uint32 {
	var n uint32
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			n++
		}
	}
	return n
}

// ID returns the cgroup id of path p: the kernfs node id, which is what
// nftables' `socket cgroupv2` compares against (8 bytes, host order). It uses
// name_to_handle_at, which is correct on 32-bit inode numbers too, and falls
// back to the directory's inode number.
func (h Hierarchy) ID(p string) (uint64, error) {
	dir, err := h.Dir(p)
	if err != nil {
		return 0, err
	}
	id, err := dirID(dir)
	if err != nil {
		return 0, fmt.Errorf("cgroup id of %s: %w", p, err)
	}
	return id, nil
}

func dirID(dir string) (uint64, error) {
	fh, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err == nil && fh.Size() == 8 {
		return binary.NativeEndian.Uint64(fh.Bytes()), nil
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("%s is not a directory", dir)
	}
	return st.Ino, nil
}

// ID returns the cgroup id of path p in the cgroup2 hierarchy.
func ID(p string) (uint64, error) {
	h, err := Find()
	if err != nil {
		return 0, err
	}
	return h.ID(p)
}

// Within reports whether cgroup path p is root or below it ("/a/b" is
// within "/a", "/ab" is not).
func Within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}
