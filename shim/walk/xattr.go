package walk

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Mark rule names. They are the gate's rule names for the same findings.
const (
	MarkMetacopy     = "metacopy"      // data still in a lower layer: upper bytes are not the file
	MarkRedirect     = "redirect"      // renamed lower directory: upper does not describe it
	MarkXwhiteout    = "xwhiteout"     // userspace-built whiteout forms, never created in an upper
	MarkBadOpaque    = "bad_opaque"    // opaque marker with an unknown value or on a non-directory
	MarkForgedOpaque = "forged_opaque" // opaque marker in the namespace the mount does not use
	MarkForgedXattr  = "forged_xattr"  // other overlay marker in the namespace the mount does not use
)

// Mark is an overlay marker on an entry that the gate must not trust.
type Mark struct {
	Rule   string
	Detail string
}

// listXattrs returns the xattr names of an opened file or directory.
func listXattrs(fd int) ([]string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Flistxattr(fd, buf)
		if err == unix.ERANGE {
			size, err := unix.Flistxattr(fd, nil)
			if err != nil {
				return nil, fmt.Errorf("list xattrs: %w", err)
			}
			buf = make([]byte, size+64)
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOTSUP {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list xattrs: %w", err)
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

// getXattr reads a small xattr value; a missing attribute is (nil, nil).
func getXattr(fd int, name string) ([]byte, error) {
	buf := make([]byte, 64)
	for {
		n, err := unix.Fgetxattr(fd, name, buf)
		switch err {
		case nil:
			return buf[:n], nil
		case unix.ENODATA, unix.ENOTSUP:
			return nil, nil
		case unix.EINTR:
			continue
		case unix.ERANGE:
			if len(buf) >= 1<<16 {
				return nil, fmt.Errorf("read xattr %s: value too large", name)
			}
			buf = make([]byte, 1<<16)
			continue
		}
		return nil, fmt.Errorf("read xattr %s: %w", name, err)
	}
}

// otherNS is the overlay xattr namespace the mount does not use.
func otherNS(ns string) string {
	if ns == "user" {
		return "trusted"
	}
	return "user"
}

// inspect reads the overlay markers of an opened directory or regular file.
// Only ns (the mount's namespace) carries meaning; an escaped marker
// (<ns>.overlay.overlay.*) was set through the merged mount and means nothing
// at this level.
func inspect(fd int, ns string, isDir bool) (opaque bool, marks []Mark, err error) {
	names, err := listXattrs(fd)
	if err != nil {
		return false, nil, err
	}
	own, other := ns+".overlay.", otherNS(ns)+".overlay."
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, own):
			switch strings.TrimPrefix(name, own) {
			case "opaque":
				v, err := getXattr(fd, name)
				if err != nil {
					return false, nil, err
				}
				switch {
				case !isDir:
					marks = append(marks, Mark{MarkBadOpaque, name + " on a non-directory"})
				case string(v) == "y":
					opaque = true
				case string(v) == "x":
					marks = append(marks, Mark{MarkXwhiteout, name + "=x (directory with xwhiteouts)"})
				default:
					marks = append(marks, Mark{MarkBadOpaque, fmt.Sprintf("%s=%q", name, v)})
				}
			case "metacopy":
				marks = append(marks, Mark{MarkMetacopy, name + ": data lives in a lower layer"})
			case "redirect":
				marks = append(marks, Mark{MarkRedirect, name + ": renamed lower directory"})
			case "whiteout":
				marks = append(marks, Mark{MarkXwhiteout, name + " (xwhiteout)"})
			}
		case strings.HasPrefix(name, other):
			switch strings.TrimPrefix(name, other) {
			case "opaque":
				marks = append(marks, Mark{MarkForgedOpaque, name + " on a " + ns + "-xattr overlay mount"})
			case "metacopy", "redirect", "whiteout", "origin":
				marks = append(marks, Mark{MarkForgedXattr, name + " on a " + ns + "-xattr overlay mount"})
			}
		}
	}
	return opaque, marks, nil
}

// isOpaque reports whether an opened lower-layer directory is opaque.
func isOpaque(fd int, ns string) (bool, error) {
	v, err := getXattr(fd, ns+".overlay.opaque")
	return string(v) == "y", err
}
