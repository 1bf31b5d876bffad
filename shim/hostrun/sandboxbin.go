package hostrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SandboxBinary is the small static binary (cmd/gensee-sandbox) the wrapper
// and the stage run as, installed beside gensee: it carries only the
// sandbox's code, so neither pays the CLI's start-up (its dependencies'
// init, the dynamic loader) twice per run. Without it gensee re-executes
// itself, which works the same, slower.
const SandboxBinary = "gensee-sandbox"

// openSandbox opens the binary the wrapper runs as: gensee-sandbox beside
// the gensee executable when it is there and trusted, else gensee itself
// (/proc/self/exe). Trusted: a regular executable of gensee's owner that
// only its owner may write, in directories of that owner (or root) that
// nobody else may write (or sticky ones), opened once without following a final symlink;
// the wrapper is started from this fd (/proc/self/fd/N), so what was
// checked is what runs. One that is there but not trusted refuses the run:
// the wrapper holds every capability until the stage drops them.
func openSandbox() (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the gensee binary: %w", err)
	}
	self, err = filepath.EvalSymlinks(self)
	if err != nil {
		return nil, fmt.Errorf("find the gensee binary: %w", err)
	}
	var own unix.Stat_t
	if err := unix.Stat(self, &own); err != nil {
		return nil, fmt.Errorf("stat the gensee binary: %w", err)
	}
	p := filepath.Join(filepath.Dir(self), SandboxBinary)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return os.Open("/proc/self/exe")
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 || st.Mode&0o022 != 0 || st.Uid != own.Uid {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular executable of uid %d that only its owner may write: reinstall it (make install) or remove it", p, own.Uid)
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		var ds unix.Stat_t
		if err := unix.Stat(d, &ds); err != nil {
			f.Close()
			return nil, fmt.Errorf("stat %s: %w", d, err)
		}
		// A sticky directory (/tmp) lets nobody rename or remove what
		// another user owns there: safe as an ancestor.
		if (ds.Uid != 0 && ds.Uid != own.Uid) || (ds.Mode&0o022 != 0 && ds.Mode&unix.S_ISVTX == 0) {
			f.Close()
			return nil, fmt.Errorf("%s, a directory above %s, may be written by others than root: install gensee in a directory only root may write", d, SandboxBinary)
		}
		if d == "/" {
			return f, nil
		}
	}
}
