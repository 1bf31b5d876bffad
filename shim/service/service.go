package service

import (
	"context"
	"os"
	"sync"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/ttrpc"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/events/wire"
)

// service wraps the stock runc task service. Every RPC it does not override
// is the embedded one.
type service struct {
	taskAPI.TTRPCTaskService

	ctx context.Context
	pub *holdingPublisher
	// events is pub as the doors' events.Publisher: events and findings
	// onto containerd's event service (shim/events/wire).
	events events.Publisher
	// now is the clock admission and deadlines read; tests may replace it.
	now func() time.Time
	// loadConfig reads the operator config named by the runtime options.
	loadConfig func(path string) (config.Config, error)
	// preload is the first Create's config and catalog, loaded at start.
	preload *preload

	seccomp seccompProbe
	front   runcFront
	monitor *frontMonitor // go-runc's monitor, answering the front's calls (nil: go-runc's own)

	mu    sync.Mutex
	ops   map[string]*operation   // by container id; guarded by mu
	stdio map[stdioKey]*heldStdio // the FIFOs held for each process (holdStdio); guarded by mu
}

// stdioKey names a process: its container and exec id ("" for the init).
type stdioKey struct{ id, exec string }

// keepStdio keeps h for process (id, exec) when its create or exec
// succeeded (err nil), and releases it otherwise.
func (s *service) keepStdio(id, exec string, h *heldStdio, err error) {
	if err != nil || h == nil || len(h.files) == 0 {
		h.release()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := stdioKey{id, exec}
	s.stdio[k].release() // a process of that name deleted without this shim seeing it
	s.stdio[k] = h
}

// heldFor is what holdStdio kept for process (id, exec); nil when nothing.
func (s *service) heldFor(id, exec string) *heldStdio {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdio[stdioKey{id, exec}]
}

// dropStdio releases what was kept for process (id, exec), once it is
// deleted, and for every exec of container id when exec is "" (the
// container is gone).
func (s *service) dropStdio(id, exec string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, h := range s.stdio {
		if k.id == id && (k.exec == exec || exec == "") {
			h.release()
			delete(s.stdio, k)
		}
	}
}

// State is the inner State with the stdio paths the client gave (the inner
// service was given the held FIFOs, see holdStdio).
func (s *service) State(ctx context.Context, r *taskAPI.StateRequest) (*taskAPI.StateResponse, error) {
	resp, err := s.TTRPCTaskService.State(ctx, r)
	if err != nil || resp == nil {
		return resp, err
	}
	if h := s.heldFor(r.ID, r.ExecID); h != nil {
		resp.Stdin, resp.Stdout, resp.Stderr = h.client(resp.Stdin), h.client(resp.Stdout), h.client(resp.Stderr)
	}
	return resp, nil
}

func newService(ctx context.Context, inner taskAPI.TTRPCTaskService, pub *holdingPublisher) *service {
	s := &service{
		TTRPCTaskService: inner,
		ctx:              ctx,
		pub:              pub,
		events:           wire.Publisher(pub),
		now:              time.Now,
		loadConfig:       daemonConfigLoader(),
		ops:              map[string]*operation{},
		stdio:            map[stdioKey]*heldStdio{},
	}
	s.preload, pending = pending, nil
	s.preload.begin()
	return s
}

// RegisterTTRPC registers the wrapper (not the inner service) as the task
// service, so the overrides below are what containerd calls.
func (s *service) RegisterTTRPC(srv *ttrpc.Server) error {
	taskAPI.RegisterTTRPCTaskService(srv, s)
	return nil
}

// daemonConfigLoader is loadTaskConfig with the directories and the
// default config the daemon's environment names.
func daemonConfigLoader() func(string) (config.Config, error) {
	return loadTaskConfig(config.TrustedDirs(os.Getenv(config.EnvConfigDirs)), os.Getenv(config.EnvConfig))
}

// loadTaskConfig loads the operator config a task names, from dirs only.
// A task that names none gets def (GENSEE_CONFIG of the daemon's
// environment, which only whoever starts containerd sets) or the default
// path. CRI sends no options for a handler without an options table, and
// must not: it cannot give a user-namespaced pod's task the IO owner
// (runc options) when the handler's options are another type.
func loadTaskConfig(dirs []string, def string) func(string) (config.Config, error) {
	return func(path string) (config.Config, error) {
		if path == "" && def != "" {
			return config.Load(def)
		}
		return config.LoadForTask(path, dirs)
	}
}

func (s *service) get(id string) *operation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[id]
}

func (s *service) put(op *operation) {
	s.mu.Lock()
	s.ops[op.containerID] = op
	s.mu.Unlock()
}

func (s *service) drop(id string) {
	s.mu.Lock()
	delete(s.ops, id)
	s.mu.Unlock()
}

// shutdown runs when the shim exits: no operation may keep a table.
func (s *service) shutdown(ctx context.Context) error {
	s.mu.Lock()
	ops := make([]*operation, 0, len(s.ops))
	for _, op := range s.ops {
		ops = append(ops, op)
	}
	s.mu.Unlock()
	for _, op := range ops {
		op.net.Close(ctx)
	}
	return nil
}
