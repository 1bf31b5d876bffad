package service

import (
	"fmt"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	runc "github.com/containerd/go-runc"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
)

// Register adds the gensee task service to the shim's plugin graph. It must
// be called once, from main, instead of importing the stock task plugin
// (both register the TTRPC plugin "task").
func Register() {
	registry.Register(&plugin.Registration{
		Type:     plugins.TTRPCPlugin,
		ID:       "task",
		Requires: []plugin.Type{plugins.EventPlugin, plugins.InternalPlugin},
		InitFn: func(ic *plugin.InitContext) (any, error) {
			// The rest of the shim's start-up is the first burst of its
			// task's start (gcburst.go), after pkg/shim has set the
			// shim's GC percent; Create's own hold nests in this one.
			holdGC(gcBurstSettle)
			go warmCodecs()
			pp, err := ic.GetByID(plugins.EventPlugin, "publisher")
			if err != nil {
				return nil, fmt.Errorf("get publisher: %w", err)
			}
			ss, err := ic.GetByID(plugins.InternalPlugin, "shutdown")
			if err != nil {
				return nil, fmt.Errorf("get shutdown service: %w", err)
			}
			pub := newHoldingPublisher(pp.(shim.Publisher))
			sd := ss.(shutdown.Service)
			inner, err := task.NewTaskService(ic.Context, pub, sd)
			if err != nil {
				return nil, err
			}
			s := newService(ic.Context, inner, pub)
			// After the inner service installed the reaper's monitor.
			s.monitor = &frontMonitor{next: runc.Monitor, front: s.front.binary}
			runc.Monitor = s.monitor
			sd.RegisterCallback(s.shutdown)
			return s, nil
		},
	})
}
