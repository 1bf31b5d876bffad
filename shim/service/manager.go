package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/log"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/runtimeopts"
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
// The front (shim/launcher) answers a cleaned-up task's delete without this
// binary; Stop sees the others: a dead shim's, a container runc still
// knows.
func (m *Manager) Stop(ctx context.Context, id string) (shim.StopStatus, error) {
	if cwd, err := os.Getwd(); err == nil {
		if err := cleanupBundle(ctx, cwd); err != nil {
			log.G(ctx).WithError(err).WithField("container_id", id).Error("gensee cleanup")
		}
	}
	return m.runc.Stop(ctx, id)
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
	rt, err := runtimeopts.ParseOptions(&a)
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
