package evidence

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/gensee/gensee/shim/netpolicy"
)

// Reach is a flow conntrack saw answered by a watched target.
type Reach struct {
	Target string // as netpolicy.Tuple prints it, like the NFLOG sensor
	At     time.Time
	Detail string // the flow, e.g. "conntrack: tcp 10.0.0.2:40000 -> 198.51.100.7:80 ESTABLISHED"
}

// FlowPoller reports conntrack flows that got a reply from a target on the
// watch. Dropped packets never become confirmed conntrack entries, so such
// a flow means packets to that target got past the table.
//
// Conntrack tracks a namespace only while something there uses it (the
// table's reply rule under allow_exact does; a deny_all table does not), so
// an empty dump proves nothing: this is a sensor, not a guarantee.
type FlowPoller struct {
	Interval time.Duration   // DefaultInterval if 0
	OnError  func(err error) // optional: dump failures, for the log
	dial     func() (flowSource, error)
	now      func() time.Time
}

// flowSource is the poller's seam to conntrack.
type flowSource interface {
	Dump() ([]conntrack.Flow, error)
	Close() error
}

// NewFlowPoller polls conntrack in the namespace netnsFD refers to.
func NewFlowPoller(netnsFD int) *FlowPoller {
	return &FlowPoller{
		dial: func() (flowSource, error) {
			c, err := conntrack.Dial(&netlink.Config{NetNS: max(netnsFD, 0)})
			if err != nil {
				return nil, err
			}
			return ctConn{c}, nil
		},
		now: time.Now,
	}
}

type ctConn struct{ *conntrack.Conn }

func (c ctConn) Dump() ([]conntrack.Flow, error) { return c.Conn.Dump(nil) }

// Run polls until ctx is done (then it returns nil). watched is asked for
// the targets on the watch each poll (the watchdog's Watched); report is
// called on Run's goroutine, once per flow.
func (p *FlowPoller) Run(ctx context.Context, watched func() []string, report func(Reach)) error {
	src, err := p.dial()
	if err != nil {
		return fmt.Errorf("poll conntrack: %w", err)
	}
	defer src.Close()
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	reported := map[string]bool{} // flow keys reported and still in the table
	for {
		if w := watched(); len(w) > 0 {
			flows, err := src.Dump()
			if err != nil {
				if p.OnError != nil && ctx.Err() == nil {
					p.OnError(fmt.Errorf("poll conntrack: %w", err))
				}
			} else {
				reported = p.scan(flows, w, reported, report)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scan reports the flows to watched targets not reported before and
// returns the keys of reported flows still in the table: a flow is reported
// once for as long as it exists.
func (p *FlowPoller) scan(flows []conntrack.Flow, watched []string, reported map[string]bool, report func(Reach)) map[string]bool {
	still := map[string]bool{}
	for _, f := range flows {
		target, key, ok := replied(f)
		switch {
		case !ok:
		case reported[key]:
			still[key] = true
		case slices.Contains(watched, target):
			still[key] = true
			report(Reach{Target: target, At: p.now(), Detail: describe(f)})
		}
	}
	return still
}

// replied returns the original destination of a flow that saw a reply, and
// a key naming the flow.
func replied(f conntrack.Flow) (target, key string, ok bool) {
	if !f.Status.SeenReply() {
		return "", "", false
	}
	o := f.TupleOrig
	if !o.IP.DestinationAddress.IsValid() {
		return "", "", false
	}
	tu := netpolicy.Tuple{Addr: o.IP.DestinationAddress.Unmap(), Proto: o.Proto.Protocol, Port: o.Proto.DestinationPort}
	if o.Proto.ICMPv4 || o.Proto.ICMPv6 {
		tu.Port = 0
	}
	return tu.String(), fmt.Sprintf("%d %s:%d %s", f.ID, o.IP.SourceAddress, o.Proto.SourcePort, tu), true
}

var tcpStates = []string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

func describe(f conntrack.Flow) string {
	o := f.TupleOrig
	tu := netpolicy.Tuple{Addr: o.IP.DestinationAddress.Unmap(), Proto: o.Proto.Protocol, Port: o.Proto.DestinationPort}
	s := fmt.Sprintf("conntrack: flow from %s port %d to %s got a reply", o.IP.SourceAddress, o.Proto.SourcePort, tu)
	if f.ProtoInfo.TCP != nil && int(f.ProtoInfo.TCP.State) < len(tcpStates) {
		s += ", tcp " + tcpStates[f.ProtoInfo.TCP.State]
	}
	return s
}
