package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrNoCgroup2 means no cgroup2 file system is mounted in the caller's mount
// namespace.
var ErrNoCgroup2 = errors.New("no cgroup2 mount in /proc/self/mountinfo")

// Hierarchy is the cgroup2 hierarchy as mounted in the caller's mount
// namespace. The zero value is not usable; get one from Find.
type Hierarchy struct {
	// Mountpoint is where cgroup2 is mounted, e.g. /sys/fs/cgroup or, on
	// hybrid hosts, /sys/fs/cgroup/unified.
	Mountpoint string
	// Root is the cgroup path the mount exposes at Mountpoint ("/" unless
	// the mount was made inside a cgroup namespace or is a bind mount).
	Root string
}

// Find reads /proc/self/mountinfo and returns the cgroup2 hierarchy.
func Find() (Hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Hierarchy{}, fmt.Errorf("find cgroup2 mount: %w", err)
	}
	defer f.Close()
	return FindIn(f)
}

// FindIn parses a mountinfo table and returns its first cgroup2 mount.
func FindIn(mountinfo io.Reader) (Hierarchy, error) {
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		// fields: id parent dev root mountpoint opts [optional...] - fstype source superopts
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fs := strings.Fields(post)
		if len(fs) == 0 || fs[0] != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return Hierarchy{Mountpoint: unescape(f[4]), Root: unescape(f[3])}, nil
	}
	if err := sc.Err(); err != nil {
		return Hierarchy{}, fmt.Errorf("read mountinfo: %w", err)
	}
	return Hierarchy{}, fmt.Errorf("%w: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy", ErrNoCgroup2)
}

// unescape undoes mountinfo's octal escapes (\040 for space and friends).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// Dir returns the directory of cgroup path p ("/a/b") under the mount. It
// refuses paths that are not absolute, not clean, or outside the mount's root,
// so a crafted path can never name a directory outside the hierarchy.
func (h Hierarchy) Dir(p string) (string, error) {
	if h.Mountpoint == "" {
		return "", fmt.Errorf("cgroup dir of %q: hierarchy not found (use cgroup.Find)", p)
	}
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return "", fmt.Errorf("cgroup dir of %q: want an absolute, clean cgroup path like /a/b", p)
	}
	root := h.Root
	if root == "" {
		root = "/"
	}
	rel := p
	if root != "/" {
		if p != root && !strings.HasPrefix(p, root+"/") {
			return "", fmt.Errorf("cgroup dir of %q: outside the cgroup2 mount's root %q", p, root)
		}
		rel = strings.TrimPrefix(p, root)
	}
	return filepath.Join(h.Mountpoint, rel), nil
}
