package nflog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// copyRange is how much of each packet the kernel copies: enough for an
// IPv6 header, a few extension headers and the ports.
const copyRange = 128

// Reader receives the packets logged to one NFLOG group in one network
// namespace. Open, then Run on one goroutine, then Close.
type Reader struct {
	c     *netlink.Conn
	group uint16
	now   func() time.Time

	pending []netlink.Message // packets that arrived while binding

	received, malformed, lost atomic.Uint64
}

// Open dials nfnetlink inside the namespace netnsFD refers to (netnsFD < 0:
// the caller's own) and binds group, copying packets' headers. Only one
// socket per namespace can bind a group: a second Open fails (EBUSY).
func Open(netnsFD int, group uint16) (_ *Reader, retErr error) {
	cfg := &netlink.Config{}
	if netnsFD >= 0 {
		cfg.NetNS = netnsFD
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("open nflog group %d: %w", group, err)
	}
	defer func() {
		if retErr != nil {
			c.Close()
		}
	}()
	r := &Reader{c: c, group: group, now: time.Now}
	// Legacy per-family binding: a no-op on kernels since 3.17, needed on
	// older ones. Unbind first so a stale logger is replaced.
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		for _, cmd := range []uint8{cmdPFUnbind, cmdPFBind} {
			if _, err := c.Execute(configMessage(fam, 0, netlink.Attribute{Type: cfgCmd, Data: []byte{cmd}})); err != nil {
				return nil, fmt.Errorf("open nflog group %d: family %d command %d: %w", group, fam, cmd, err)
			}
		}
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = copyPacket
	if err := r.bind(configMessage(unix.AF_UNSPEC, group,
		netlink.Attribute{Type: cfgCmd, Data: []byte{cmdBind}},
		netlink.Attribute{Type: cfgMode, Data: mode},
		netlink.Attribute{Type: cfgQThresh, Data: be32(1)},  // deliver each packet at once
		netlink.Attribute{Type: cfgTimeout, Data: be32(10)}, // or within 100 ms
	)); err != nil {
		return nil, fmt.Errorf("open nflog group %d: %w", group, err)
	}
	return r, nil
}

// bind sends the bind request and waits for its acknowledgement, keeping
// packets that arrive in between for Run.
func (r *Reader) bind(m netlink.Message) error {
	req, err := r.c.Send(m)
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	for range 64 {
		msgs, err := r.c.Receive()
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("bind: another socket holds the group in this namespace (or no CAP_NET_ADMIN): %w", err)
		}
		if err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type == netlink.Error && m.Header.Sequence == req.Header.Sequence {
				return nil
			}
			if m.Header.Type == packetType {
				r.pending = append(r.pending, m)
			}
		}
	}
	return errors.New("bind: no acknowledgement")
}

func configMessage(family uint8, group uint16, attrs ...netlink.Attribute) netlink.Message {
	ab, _ := netlink.MarshalAttributes(attrs) // cannot fail: fixed, valid attributes
	hdr := []byte{family, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], group)
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | msgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(hdr, ab...),
	}
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// Run delivers an Attempt on out for every packet logged to the group until
// ctx is done (then it returns nil) or the socket fails. It blocks while out
// is full: the kernel then drops messages, which Lost counts. It never
// closes out. Call it once.
func (r *Reader) Run(ctx context.Context, out chan<- Attempt) error {
	// A read deadline in the past wakes the blocked Receive on cancel.
	stop := context.AfterFunc(ctx, func() { r.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	deliver := func(msgs []netlink.Message) bool {
		for _, m := range msgs {
			a, err := parseMessage(m, r.group, r.now())
			if errors.Is(err, errNotPacket) {
				continue
			}
			if err != nil {
				r.malformed.Add(1)
				continue
			}
			r.received.Add(1)
			select {
			case out <- a:
			case <-ctx.Done():
				return false
			}
		}
		return true
	}
	if !deliver(r.pending) {
		return nil
	}
	r.pending = nil
	for {
		msgs, err := r.c.Receive()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, unix.ENOBUFS):
			r.lost.Add(1) // the socket overran: an unknown number of packets
			continue
		case err != nil:
			return fmt.Errorf("receive nflog group %d: %w", r.group, err)
		}
		if !deliver(msgs) {
			return nil
		}
	}
}

// Received counts the attempts parsed (delivered, or being delivered).
func (r *Reader) Received() uint64 { return r.received.Load() }

// Malformed counts packet messages that did not parse.
func (r *Reader) Malformed() uint64 { return r.malformed.Load() }

// Lost counts socket overruns (ENOBUFS); each lost one or more packets.
func (r *Reader) Lost() uint64 { return r.lost.Load() }

// Close closes the socket; the kernel unbinds the group with it.
func (r *Reader) Close() error {
	if err := r.c.Close(); err != nil {
		return fmt.Errorf("close nflog group %d: %w", r.group, err)
	}
	return nil
}
