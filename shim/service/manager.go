package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/process"
	runcshim "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/runc"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	runc "github.com/containerd/go-runc"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/gensee/gensee/shim/config"
)

// Manager is the shim's process-lifecycle side: it starts the long-lived
// shim like the runc manager does, answers -info with runc's features under
// translated options, and on every shim exit (including after a SIGKILLed
// shim) removes what an operation may have left.
type Manager struct {
	runc shim.Shim
}

// NewManager returns the gensee manager for runtime name.
func NewManager(name string) *Manager { return &Manager{runc: manager.NewShimManager(name)} }

// Name is the runtime name.
func (m *Manager) Name() string { return m.runc.Name() }

// Start re-execs the shim exactly as the runc manager does.
func (m *Manager) Start(ctx context.Context, p *bootapi.BootstrapParams) (*bootapi.BootstrapResult, error) {
	return m.runc.Start(ctx, p)
}

// Stop runs for `shim delete`, whose working directory is the bundle. It
// must be idempotent and fit containerd's 5 s cleanup budget: it removes the
// operation's table if the shim did not, then lets runc delete the rest.
// containerd runs it after every shim's end, a clean one too, and waits
// for it before its task Delete returns: when runc keeps no state for the
// container (the shim deleted it), stopDeleted answers as the runc
// manager's Stop would without its `runc delete --force`, which could only
// fail with "container does not exist" (an exec of runc, about 5 ms of
// every `ctr run --rm` on the 2-vCPU VMs).
func (m *Manager) Stop(ctx context.Context, id string) (shim.StopStatus, error) {
	cwd, err := os.Getwd()
	if err == nil {
		if err := cleanupBundle(ctx, cwd); err != nil {
			log.G(ctx).WithError(err).WithField("container_id", id).Error("gensee cleanup")
		}
		path := filepath.Join(filepath.Dir(cwd), id) // as the runc manager's Stop
		if runcStateGone(ctx, path, id) {
			return stopDeleted(ctx, path), nil
		}
	}
	return m.runc.Stop(ctx, id)
}

// runcStateGone reports whether runc, under the root the runc manager's
// Stop would pass it for the bundle at path, has no state directory for
// container id. Anything unclear (no namespace, unreadable options, a
// state path that cannot be looked at) says no: the runc manager decides.
func runcStateGone(ctx context.Context, path, id string) bool {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return false
	}
	opts, err := runcshim.ReadOptions(path)
	if err != nil {
		return false
	}
	root := process.RuncRoot
	if opts != nil && opts.Root != "" {
		root = opts.Root
	}
	_, err = os.Lstat(filepath.Join(root, ns, id))
	return errors.Is(err, fs.ErrNotExist)
}

// stopDeleted is the runc manager's Stop (containerd v2.4) after its
// `runc delete --force`, for a container runc no longer knows: the
// rootfs's mounts removed, then the exit status the shim recorded, else
// the init's pid with a SIGKILL status (TestStopDeletedMatchesRunc).
func stopDeleted(ctx context.Context, path string) shim.StopStatus {
	fallbackExitedAt := time.Now()
	if err := mount.UnmountRecursive(filepath.Join(path, "rootfs"), 0); err != nil {
		log.G(ctx).WithError(err).Warn("failed to cleanup rootfs mount")
	}
	exit, err := runcshim.ReadExitStatus(path)
	if err == nil {
		return shim.StopStatus{ExitedAt: exit.Timestamp, ExitStatus: exit.Status, Pid: exit.Pid}
	}
	if !errors.Is(err, os.ErrNotExist) {
		log.G(ctx).WithError(err).Warn("failed to read recorded exit status")
	}
	pid, err := runc.ReadPidFile(filepath.Join(path, process.InitPidFile))
	if err != nil {
		log.G(ctx).WithError(err).Warn("failed to read init pid file")
		pid = 0
	}
	return shim.StopStatus{ExitedAt: fallbackExitedAt, ExitStatus: 128 + int(unix.SIGKILL), Pid: pid}
}

// Info translates runtimeoptions into runc options first, so CRI's feature
// detection (user namespaces, recursive read-only mounts) keeps working.
func (m *Manager) Info(ctx context.Context, r io.Reader) (*types.RuntimeInfo, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read runtime options: %w", err)
	}
	if len(data) == 0 {
		return m.runc.Info(ctx, bytes.NewReader(nil))
	}
	var a anypb.Any
	if err := proto.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decode runtime options: %w", err)
	}
	rt, err := config.ParseOptions(&a)
	if err != nil {
		return nil, err
	}
	cfg, err := loadTaskConfig(config.TrustedDirs(os.Getenv(config.EnvConfigDirs)), os.Getenv(config.EnvConfig))(rt.ConfigPath)
	if err != nil {
		return nil, err
	}
	ra, err := rt.RuncAny(cfg)
	if err != nil {
		return nil, err
	}
	out, err := proto.Marshal(ra)
	if err != nil {
		return nil, fmt.Errorf("encode runc options: %w", err)
	}
	return m.runc.Info(ctx, bytes.NewReader(out))
}
