package hostfacts

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// MaxSocketScan bounds how many entries a bind source's scan for unix
// sockets reads; a larger tree is refused unless the operator vouches for
// it (readable_bind_roots). A variable for tests.
var MaxSocketScan = 20000

// errTooLarge ends a scan over its budget.
var errTooLarge = errors.New("too many entries to scan")

// FindSocket returns the path of a unix socket at or below root (a host
// path, symlinks not followed below it, other mounts not crossed), "" when
// there is none. connect(2) works through a read-only mount, so a socket in
// a bound tree is a channel out of the container: to a host service
// (systemd, dbus) that acts as host root, outside the cgroup and the table.
func FindSocket(root string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		return root, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", nil
	}
	n := 0
	found, err := scan(root, st.Dev, &n)
	if errors.Is(err, errTooLarge) {
		return "", fmt.Errorf("%s holds more than %d entries to check for unix sockets", root, MaxSocketScan)
	}
	return found, err
}

func scan(dir string, dev uint64, n *int) (string, error) {
	fd, err := fsafe.OpenDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return "", err
	}
	// Listed only to what is left of the budget: a name past it ends the
	// scan anyway, so a huge directory is not read whole to be refused.
	names, cut, err := fsafe.ReadNames(fd, int64(MaxSocketScan-*n))
	unix.Close(fd)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", dir, err)
	}
	for _, name := range names {
		if *n++; *n > MaxSocketScan {
			return "", errTooLarge
		}
		p := filepath.Join(dir, name)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			continue // gone meanwhile
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFSOCK:
			return p, nil
		case unix.S_IFDIR:
			if st.Dev != dev {
				continue // another mount: Submounts and FSTyper judge it
			}
			if found, err := scan(p, dev, n); err != nil || found != "" {
				return found, err
			}
		}
	}
	if cut {
		return "", errTooLarge
	}
	return "", nil
}
