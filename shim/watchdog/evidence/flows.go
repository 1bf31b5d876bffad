package evidence

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"

	"github.com/gensee/gensee/shim/cgroup"
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
// Conntrack tracks a namespace only while something there uses it (every
// gensee table does: its first rule labels the flows the container opens;
// a namespace whose table was deleted may not be), so an empty dump proves
// nothing: this is a sensor, not a guarantee.
type FlowPoller struct {
	Interval time.Duration   // DefaultInterval if 0
	OnError  func(err error) // optional: dump failures, for the log
	// Escapees, when set, lists the container's processes found outside
	// the bound cgroup (BindingPoller.Escaped): their own connected
	// sockets are read each poll (escapeeConns), so an escaped process
	// reaching a watched target is reported by pid, even where conntrack
	// does not track the namespace.
	Escapees func() []cgroup.Proc
	// Scope and Serve are the table's (netpolicy.Plan): which flows of
	// the namespace are the container's, and the served ports. In
	// ScopeCgroup (a shared namespace) a flow reached a target for the
	// container only if it carries the own label (netpolicy.OwnLabel,
	// set by the table on the flows the cgroup's sockets open); any
	// other scope takes every flow of the namespace for the container's.
	// In either, a flow a watched target opened counts as answered by
	// the container only on a served port (Serve, the flow's original
	// destination port), with the serve label (the inbound packet passed
	// the reverse-path check) and without the own label (not the
	// container connecting to its own served port).
	Scope netpolicy.Scope
	Serve []netpolicy.ServePort
	dial  func() (flowSource, error)
	now   func() time.Time
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
	sockets := map[string]bool{}  // escapee sockets reported
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
			if p.Escapees != nil {
				p.scanEscapees(p.Escapees(), w, sockets, report)
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
		dst, src, key, ok := replied(f)
		switch {
		case !ok:
		case reported[key]:
			still[key] = true
		case slices.Contains(watched, dst) && p.opened(f):
			still[key] = true
			report(Reach{Target: dst, At: p.now(), Detail: describe(f)})
		case slices.Contains(watched, src) && p.answered(f):
			still[key] = true
			report(Reach{Target: src, At: p.now(), Detail: describeAnswered(f)})
		}
	}
	return still
}

// opened says whether flow f is one the container opened: in cgroup scope
// only a flow the table labelled for the cgroup's sockets (a shared
// namespace's other tenants, and entries older than the table, carry no
// label); in netns scope every flow of the namespace.
func (p *FlowPoller) opened(f conntrack.Flow) bool {
	return p.Scope != netpolicy.ScopeCgroup || netpolicy.HasLabel(f.Labels, netpolicy.OwnLabel)
}

// answered says whether flow f is one a peer opened to a served port of
// the container and the container may have answered: its original
// destination port is served, its inbound packet passed the table's
// reverse-path check (the serve label, which in cgroup scope also means a
// socket of the cgroup received it), and the container did not open it
// (the own label: the workload connecting to its own served port from a
// port it chose, e.g. one it was denied as a target).
func (p *FlowPoller) answered(f conntrack.Flow) bool {
	o := f.TupleOrig
	served := slices.Contains(p.Serve, netpolicy.ServePort{Proto: o.Proto.Protocol, Port: o.Proto.DestinationPort})
	return served && netpolicy.HasLabel(f.Labels, netpolicy.ServeLabel) && !netpolicy.HasLabel(f.Labels, netpolicy.OwnLabel)
}

// scanEscapees reports each connected socket of an escaped process whose
// peer is watched, once per process and socket.
func (p *FlowPoller) scanEscapees(escapees []cgroup.Proc, watched []string, reported map[string]bool, report func(Reach)) {
	for _, pr := range escapees {
		for _, c := range escapeeConns(pr) {
			target := c.target.String()
			key := fmt.Sprintf("%d %d %d", pr.PID, pr.Start, c.inode)
			if reported[key] || !slices.Contains(watched, target) {
				continue
			}
			reported[key] = true
			report(Reach{Target: target, At: p.now(),
				Detail: fmt.Sprintf("process %d, found outside the bound cgroup, holds a %s socket connected to %s", pr.PID, netpolicy.ProtoName(c.target.Proto), target)})
		}
	}
}

// replied returns, for a flow that saw a reply, its original destination
// (the container reached it, if it opened the flow: opened), its original
// source (the container answered it, if a peer opened the flow to a served
// port: answered), and a key naming the flow.
func replied(f conntrack.Flow) (dst, src, key string, ok bool) {
	if !f.Status.SeenReply() {
		return "", "", "", false
	}
	o := f.TupleOrig
	if !o.IP.DestinationAddress.IsValid() || !o.IP.SourceAddress.IsValid() {
		return "", "", "", false
	}
	d := endpoint(o.IP.DestinationAddress, o.Proto.Protocol, o.Proto.DestinationPort, o)
	s := endpoint(o.IP.SourceAddress, o.Proto.Protocol, o.Proto.SourcePort, o)
	return d.String(), s.String(), fmt.Sprintf("%d %s:%d %s", f.ID, o.IP.SourceAddress, o.Proto.SourcePort, d), true
}

// endpoint is one end of a flow as the NFLOG sensor names a target.
func endpoint(a netip.Addr, proto uint8, port uint16, o conntrack.Tuple) netpolicy.Tuple {
	tu := netpolicy.Tuple{Addr: a.Unmap(), Proto: proto, Port: port}
	if o.Proto.ICMPv4 || o.Proto.ICMPv6 {
		tu.Port = 0
	}
	return tu
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

// describeAnswered: the flow a watched target opened, which the container
// answered.
func describeAnswered(f conntrack.Flow) string {
	o := f.TupleOrig
	peer := endpoint(o.IP.SourceAddress, o.Proto.Protocol, o.Proto.SourcePort, o)
	s := fmt.Sprintf("conntrack: flow %s opened to %s port %d was answered by the container (served)", peer, o.IP.DestinationAddress, o.Proto.DestinationPort)
	if f.ProtoInfo.TCP != nil && int(f.ProtoInfo.TCP.State) < len(tcpStates) {
		s += ", tcp " + tcpStates[f.ProtoInfo.TCP.State]
	}
	return s
}
