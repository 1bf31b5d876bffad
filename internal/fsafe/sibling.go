package fsafe

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// TrustedSibling is the path of the executable name in the directory of
// the running binary, when it is as trusted as that binary: a regular,
// executable file of the same owner that nobody else may write. A symlink
// is resolved: the path returned is the file's own, as os.Executable
// names it once it runs.
func TrustedSibling(name string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own binary: %w", err)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(self), name))
	if err != nil {
		return "", err
	}
	var st, own unix.Stat_t
	if err := unix.Stat(self, &own); err != nil {
		return "", &os.PathError{Op: "stat", Path: self, Err: err}
	}
	if err := unix.Stat(p, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 || st.Mode&0o022 != 0 || st.Uid != own.Uid {
		return "", fmt.Errorf("%s is not a regular executable of uid %d that only its owner may write", p, own.Uid)
	}
	return p, nil
}
