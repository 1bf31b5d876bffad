package observe

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// DefaultPath is the PATH searched when process.env sets none: containerd's
// default for Linux containers (oci.DefaultPathEnv).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// executable is the file args[0] resolved to, opened for reading.
type executable struct {
	path string // the path looked up inside the rootfs, before symlinks
	f    *os.File
	size int64
}

func cwdOf(p *specs.Process) string {
	if p.Cwd == "" {
		return "/"
	}
	return p.Cwd
}

// pathOf returns the PATH runc will search: the last PATH= entry of env
// (runc de-duplicates env keeping the last occurrence), else DefaultPath.
// A PATH set to "" stays empty: nothing is found.
func pathOf(env []string) string {
	p := DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	return p
}

// resolve finds the file runc's exec.LookPath(args[0]) will execute, inside
// root. An args[0] containing "/" is one path, relative to cwd unless
// absolute, left uncleaned so the kernel resolves ".." as execve will.
// Otherwise each absolute PATH entry is tried in order (joined lexically,
// as Go's LookPath does); relative entries are skipped because runc refuses
// a relative match (exec.ErrDot). The first regular file with any exec bit
// wins; misses, directories and special files are passed over.
func resolve(root *os.File, arg0, cwd, pathEnv string) (executable, error) {
	if strings.Contains(arg0, "/") {
		p := arg0
		if !path.IsAbs(p) {
			p = strings.TrimSuffix(cwd, "/") + "/" + p
		}
		exe, err := openExecutable(root, p)
		if err != nil {
			return executable{}, fmt.Errorf("resolve process.args[0] %q as %s inside the rootfs: %w", arg0, p, err)
		}
		return exe, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !path.IsAbs(dir) {
			continue
		}
		exe, err := openExecutable(root, path.Join(dir, arg0))
		switch {
		case err == nil:
			return exe, nil
		case errors.Is(err, ErrExecutableNotFound), errors.Is(err, ErrNotExecutable):
			continue
		default:
			return executable{}, fmt.Errorf("resolve process.args[0] %q in PATH: %w", arg0, err)
		}
	}
	return executable{}, fmt.Errorf("resolve process.args[0] %q: no executable regular file of that name in PATH %q inside the rootfs; fix the image or use an absolute path: %w",
		arg0, pathEnv, ErrExecutableNotFound)
}
