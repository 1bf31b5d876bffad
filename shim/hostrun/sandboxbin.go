package hostrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// SandboxBinary is the small static binary (cmd/gensee-sandbox) the wrapper
// and the stage run as, installed beside gensee: it carries only the
// sandbox's code, so neither pays the CLI's start-up (its dependencies'
// init, the dynamic loader) twice per run. Without it gensee re-executes
// itself, which works the same, slower.
const SandboxBinary = "gensee-sandbox"

// openSandbox opens the binary the wrapper runs as: gensee-sandbox beside
// the gensee executable when it is there and trusted, else gensee itself
// (/proc/self/exe). Trusted (fsafe.OpenTrusted): a regular executable of
// gensee's owner that only its owner may write, in directories of that
// owner (or root) that nobody else may write (or sticky ones), opened once
// without following a final symlink; the wrapper is started from this fd
// (/proc/self/fd/N), so what was checked is what runs. One that is there
// but not trusted refuses the run: the wrapper holds every capability
// until the stage drops them.
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
	f, err := fsafe.OpenTrusted(p, own.Uid)
	var ue *fsafe.UntrustedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.Open("/proc/self/exe")
	case errors.As(err, &ue) && ue.Path == p:
		return nil, fmt.Errorf("%w: install it again beside gensee (make build puts both in bin/) or remove it", err)
	case errors.As(err, &ue):
		return nil, fmt.Errorf("%w, above %s: install gensee in a directory only root may write", err, SandboxBinary)
	case err != nil:
		return nil, err
	}
	return f, nil
}

// sandboxPath is the path to run the sandbox binary by: self when the
// request names one, else the fd openSandbox opened (/proc/self/fd/N),
// which done closes once the process has started.
func sandboxPath(self string) (path string, done func(), err error) {
	if self != "" {
		return self, func() {}, nil
	}
	bin, err := openSandbox()
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(int(bin.Fd())), func() { bin.Close() }, nil
}
