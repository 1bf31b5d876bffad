package evidence

import (
	"context"
	"fmt"

	"github.com/google/nftables"

	"github.com/gensee/gensee/shim/netpolicy"
)

// kernelTable is the tableSource of a real namespace.
type kernelTable struct {
	netnsFD int
	plan    *netpolicy.Plan
	gen     *netpolicy.GenConn // opened on first use, closed by Close
	// ahead is the next Monitor's connection, being opened (dialAhead);
	// nil: Monitor opens its own.
	ahead chan dialed
}

type dialed struct {
	c   *nftables.Conn
	err error
}

// dialAhead starts opening the next Monitor's connection in the
// namespace (a socket made there: a thread's setns in and back) beside
// the caller's own work; Monitor joins the group on it then.
func (k *kernelTable) dialAhead() {
	ch := make(chan dialed, 1)
	k.ahead = ch
	go func() {
		c, err := k.dialMonitor()
		ch <- dialed{c, err}
	}()
}

// dialMonitor opens a lasting connection in the namespace, for a monitor.
func (k *kernelTable) dialMonitor() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if k.netnsFD > 0 {
		opts = append(opts, nftables.WithNetNSFd(k.netnsFD))
	}
	return nftables.New(opts...)
}

func (k *kernelTable) ReadBack(ctx context.Context) (netpolicy.Matched, error) {
	return netpolicy.ReadBackAt(ctx, k.netnsFD, k.plan)
}

// Generation reads the generation on a socket of its own, kept for the
// watcher's life: a poll costs one request, not a socket made in the
// namespace.
func (k *kernelTable) Generation() (uint32, error) {
	if k.gen == nil {
		g, err := netpolicy.OpenGen(k.netnsFD)
		if err != nil {
			return 0, err
		}
		k.gen = g
	}
	gen, err := k.gen.Read()
	if err != nil {
		k.Close() // opened again at the next poll
	}
	return gen, err
}

func (k *kernelTable) Close() {
	if k.gen != nil {
		k.gen.Close()
		k.gen = nil
	}
	if k.ahead != nil {
		if d := <-k.ahead; d.c != nil {
			d.c.CloseLasting()
		}
		k.ahead = nil
	}
}

// Monitor subscribes on a connection of its own in the namespace, so the
// subscription never shares a socket with requests.
func (k *kernelTable) Monitor() (<-chan generation, func(), error) {
	var d dialed
	if k.ahead != nil {
		d = <-k.ahead
		k.ahead = nil
	} else {
		d.c, d.err = k.dialMonitor()
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("open nftables monitor connection: %w", d.err)
	}
	c := d.c
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(64))
	evs, err := c.AddGenerationalMonitor(mon)
	if err != nil {
		c.CloseLasting()
		return nil, nil, fmt.Errorf("subscribe to nftables changes: %w", err)
	}
	out := make(chan generation)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for e := range evs {
			g, ok := k.generation(e)
			if !ok {
				continue
			}
			select {
			case out <- g:
			case <-done:
			}
		}
	}()
	stop := func() {
		close(done)
		mon.Close()
		// The connection is lasting: closing it ends the library's
		// reader, which then closes its channel.
		c.CloseLasting()
		// The library's reader blocks on sending until its channel is
		// drained; the forwarder above drains it through done.
		for range out {
		}
	}
	return out, stop, nil
}

// generation condenses one monitor generation to what concerns our table.
// An out-of-band event (lost messages) yields an empty generation that
// still triggers a read-back.
func (k *kernelTable) generation(e *nftables.MonitorEvents) (generation, bool) {
	var g generation
	if e == nil {
		return g, false
	}
	if e.GeneratedBy != nil {
		if gm, ok := e.GeneratedBy.Data.(*nftables.GenMsg); ok {
			g.PID, g.Comm = gm.ProcPID, gm.ProcComm
		}
		if e.GeneratedBy.Type == nftables.MonitorEventTypeOOB {
			g.Unknown++
		}
	}
	for _, ch := range e.Changes {
		if ch == nil || ch.Type == nftables.MonitorEventTypeOOB {
			continue
		}
		switch table := tableOf(ch.Data); {
		case table == k.plan.Table:
			g.Ours = append(g.Ours, changeName(ch.Type))
		case table == "":
			g.Unknown++
		}
	}
	return g, len(g.Ours) > 0 || g.Unknown > 0
}

// tableOf names the table a monitor object belongs to; "" if unknown.
func tableOf(d any) string {
	var t *nftables.Table
	switch o := d.(type) {
	case *nftables.Table:
		t = o
	case *nftables.Chain:
		t = o.Table
	case *nftables.Rule:
		t = o.Table
	case *nftables.Set:
		t = o.Table
	case *nftables.CounterObj:
		t = o.Table
	case *nftables.QuotaObj:
		t = o.Table
	case *nftables.NamedObj:
		t = o.Table
	}
	if t == nil {
		return ""
	}
	return t.Name
}

func changeName(t nftables.MonitorEventType) string {
	switch t {
	case nftables.MonitorEventTypeNewTable:
		return "new table"
	case nftables.MonitorEventTypeDelTable:
		return "table deleted"
	case nftables.MonitorEventTypeNewChain:
		return "new chain"
	case nftables.MonitorEventTypeDelChain:
		return "chain deleted"
	case nftables.MonitorEventTypeNewRule:
		return "new rule"
	case nftables.MonitorEventTypeDelRule:
		return "rule deleted"
	case nftables.MonitorEventTypeNewSet:
		return "new set"
	case nftables.MonitorEventTypeDelSet:
		return "set deleted"
	case nftables.MonitorEventTypeNewSetElem:
		return "new set element"
	case nftables.MonitorEventTypeDelSetElem:
		return "set element deleted"
	case nftables.MonitorEventTypeNewObj:
		return "new object"
	case nftables.MonitorEventTypeDelObj:
		return "object deleted"
	}
	return fmt.Sprintf("change %d", t)
}
