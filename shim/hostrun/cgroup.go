package hostrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/cgroup"
)

// ParentCgroup is the cgroup (below the cgroup2 mount's root) that holds
// every host run's transient cgroup.
const ParentCgroup = "gensee"

// transient is one run's cgroup: created empty, entered only by the
// wrapper at its birth (CLONE_INTO_CGROUP), removed once drained.
type transient struct {
	h    cgroup.Hierarchy
	Path string // cgroup path, e.g. /gensee/<opid>
	Dir  string // its directory under the cgroup2 mount
	ID   uint64
}

// createCgroup makes <cgroup2>/gensee/<opid>. The hierarchy is found in the
// mount table (on hybrid hosts, /sys/fs/cgroup/unified).
func createCgroup(opID string) (*transient, error) {
	h, err := cgroup.Find()
	if err != nil {
		return nil, err
	}
	root := h.Root
	if root == "" {
		root = "/"
	}
	p := path.Join(root, ParentCgroup, opID)
	dir, err := h.Dir(p)
	if err != nil {
		return nil, err
	}
	// The parent goes when its last run does (removeCgroup): a run that
	// finds it just removed makes it again.
	for try := 0; ; try++ {
		if err := os.Mkdir(path.Dir(dir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create parent cgroup %s: %w", path.Dir(dir), err)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) || try == 3 {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	id, err := h.ID(p)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &transient{h: h, Path: p, Dir: dir, ID: id}, nil
}

// open returns an fd of the cgroup directory for CLONE_INTO_CGROUP.
func (t *transient) open() (*os.File, error) {
	f, err := os.OpenFile(t.Dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", t.Dir, err)
	}
	return f, nil
}

// kill writes cgroup.kill: every process of the subtree gets SIGKILL.
func (t *transient) kill() error {
	return os.WriteFile(path.Join(t.Dir, "cgroup.kill"), []byte("1"), 0)
}

// remove drains and removes the cgroup; idempotent.
func removeCgroup(ctx context.Context, h cgroup.Hierarchy, p string) error {
	dir, err := h.Dir(p)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := h.Drain(ctx, p); err != nil {
		return fmt.Errorf("drain cgroup %s: %w", p, err)
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	unix.Rmdir(path.Dir(dir)) // the gensee parent, unless another run holds it (EBUSY)
	return nil
}
