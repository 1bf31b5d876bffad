package trust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// openParent walks from "/" down to the directory holding the absolute,
// cleaned path p, one openat(O_PATH|O_NOFOLLOW) per component, and checks
// each directory with fstat on the fd it holds (so nothing can be swapped
// between check and use): a real directory (a symlinked parent is refused;
// configure the resolved path), owned by root, not writable by group or
// other (OpenSSH StrictModes' rule). It returns an O_PATH fd of the parent.
func openParent(p string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, anchorErr(p, RuleIO, "cannot open /", "check the host's root directory", err)
	}
	if err := checkDir(p, "/", fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	w := fsafe.Walker{Flags: unix.O_PATH, Check: func(fd int, rel string) error { return checkDir(p, "/"+rel, fd) }}
	parent, err := w.Open(fd, strings.TrimPrefix(filepath.Dir(p), "/"))
	unix.Close(fd)
	var pe *os.PathError
	if errors.As(err, &pe) {
		cur := "/" + pe.Path
		return -1, anchorErr(p, RuleParentDir, fmt.Sprintf("parent directory %s cannot be opened (%v)", cur, pe.Err),
			"create it owned by root with mode 0755, or set trust_anchor to an existing root-owned directory", pe.Err)
	}
	return parent, err
}

// checkDir applies the parent-directory rules to the directory dir open as fd.
func checkDir(p, dir string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return anchorErr(p, RuleIO, "cannot stat parent directory "+dir, "check the file system", err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return anchorErr(p, RuleParentDir, fmt.Sprintf("parent %s is a symlink", dir),
			"set trust_anchor to the fully resolved path (run: realpath "+p+")", nil)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return anchorErr(p, RuleParentDir, fmt.Sprintf("parent %s is not a directory", dir),
			"set trust_anchor to a file inside a root-owned directory such as /etc/gensee", nil)
	case st.Uid != 0:
		return anchorErr(p, RuleParentOwner, fmt.Sprintf("parent directory %s is owned by uid %d, not root", dir, st.Uid),
			"move the anchor under a root-owned directory such as /etc/gensee, or run: chown root:root "+dir, nil)
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX != 0:
		return anchorErr(p, RuleParentMode, fmt.Sprintf("parent directory %s has mode %04o (a shared directory anyone can write)", dir, st.Mode&0o7777),
			"move the anchor to a directory only root can write, such as /etc/gensee, and point trust_anchor there", nil)
	case st.Mode&0o022 != 0:
		return anchorErr(p, RuleParentMode, fmt.Sprintf("parent directory %s has mode %04o, writable by group/other", dir, st.Mode&0o7777),
			"run: chmod go-w "+dir, nil)
	}
	return nil
}

func anchorErr(p string, rule Rule, problem, fix string, err error) *AnchorError {
	return &AnchorError{Path: p, Rule: rule, Problem: problem, Fix: fix, Err: err}
}
