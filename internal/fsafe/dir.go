package fsafe

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadNames lists the directory open as fd from its start (getdents64 on
// the fd, never a path), returning at most budget names (budget < 0: no
// limit) and whether the listing was cut short. "." and ".." are left out.
func ReadNames(fd int, budget int64) ([]string, bool, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, false, fmt.Errorf("rewind directory: %w", err)
	}
	buf := make([]byte, 32<<10)
	var names []string
	for {
		n, err := RetryEINTR(func() (int, error) { return unix.ReadDirent(fd, buf) })
		if err != nil {
			return nil, false, fmt.Errorf("read directory: %w", err)
		}
		if n <= 0 {
			return names, false, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		if budget >= 0 && int64(len(names)) > budget {
			return names[:budget], true, nil
		}
	}
}

// Within reports whether the clean path p is dir or lies below it. Both
// are absolute, or both relative to one root; dir "/" (absolute) or ""
// (relative: the root itself) contains everything.
func Within(p, dir string) bool {
	return dir == "" || dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
