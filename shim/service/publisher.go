package service

import (
	"context"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/log"
)

// holdingPublisher holds the init TaskExit of a gated container until the
// container's exit path is done, so no client sees the exit before the
// records are final. It never blocks the inner service's single forwarding
// goroutine: a held event is published from its own goroutine.
type holdingPublisher struct {
	shim.Publisher

	mu     sync.Mutex
	holds  map[string]*hold          // by container id; guarded by mu
	rootfs map[string][]*types.Mount // by container id, for its TaskCreate; guarded by mu
}

type hold struct {
	done      <-chan struct{} // closed when the exit path finished
	cancel    chan struct{}   // closed when there is no exit path to wait for
	once      sync.Once
	published chan struct{} // closed once the held TaskExit went out
	override  *uint32       // exit status to report instead; written before done closes
}

func newHoldingPublisher(p shim.Publisher) *holdingPublisher {
	return &holdingPublisher{Publisher: p, holds: map[string]*hold{}, rootfs: map[string][]*types.Mount{}}
}

// createdOn names the rootfs mounts of id's TaskCreate: the shim mounts
// the snapshot itself and hands the inner Create none, whose event would
// otherwise carry none. forget (once the inner Create returned) drops
// what no event took.
func (p *holdingPublisher) createdOn(id string, mounts []*types.Mount) (forget func()) {
	p.mu.Lock()
	p.rootfs[id] = mounts
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.rootfs, id)
		p.mu.Unlock()
	}
}

// arm makes the next init TaskExit of id wait for done.
func (p *holdingPublisher) arm(id string, done <-chan struct{}) *hold {
	h := &hold{done: done, cancel: make(chan struct{}), published: make(chan struct{})}
	p.mu.Lock()
	p.holds[id] = h
	p.mu.Unlock()
	return h
}

// disarm forgets the hold of id (task deleted without a held exit).
func (p *holdingPublisher) disarm(id string) {
	p.mu.Lock()
	delete(p.holds, id)
	p.mu.Unlock()
}

// release lets an exit h may already hold go out now, as it is: there is
// no exit path to wait for (the inner Start failed after the init's exit
// was forwarded). The hold is forgotten too.
func (p *holdingPublisher) release(id string, h *hold) {
	p.disarm(id)
	h.once.Do(func() { close(h.cancel) })
}

// Publish forwards events, holding the armed init TaskExit.
func (p *holdingPublisher) Publish(ctx context.Context, topic string, event events.Event) error {
	if e, ok := event.(*eventstypes.TaskCreate); ok && len(e.Rootfs) == 0 {
		p.mu.Lock()
		if m, ok := p.rootfs[e.ContainerID]; ok {
			e.Rootfs = m
			delete(p.rootfs, e.ContainerID)
		}
		p.mu.Unlock()
	}
	if e, ok := event.(*eventstypes.TaskExit); ok && e.ID == e.ContainerID {
		p.mu.Lock()
		h := p.holds[e.ContainerID]
		delete(p.holds, e.ContainerID)
		p.mu.Unlock()
		if h != nil {
			go func() {
				select {
				case <-h.done:
					if h.override != nil {
						e.ExitStatus = *h.override
					}
				case <-h.cancel:
				}
				if err := p.Publisher.Publish(ctx, topic, event); err != nil {
					log.G(ctx).WithError(err).WithField("container_id", e.ContainerID).Error("publish held task exit")
				}
				close(h.published)
			}()
			return nil
		}
	}
	return p.Publisher.Publish(ctx, topic, event)
}

// waitPublished waits (bounded) until the held exit of h went out, so the
// TaskDelete that follows never overtakes it.
func (h *hold) waitPublished(ctx context.Context) {
	if h == nil {
		return
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-h.published:
	case <-t.C:
	case <-ctx.Done():
	}
}
