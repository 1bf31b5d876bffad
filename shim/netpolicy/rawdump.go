package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dumpRecvBuf is the receive buffer for dumps. The kernel sizes each dump
// message to the largest buffer the reader has used (capped near 32 KiB),
// and nf_tables resumes a set dump by re-walking the set and skipping what
// it already sent: with mdlayher/netlink's page-sized reads a 10,000-element
// dump took ~150 round trips and 23 ms; with 64 KiB reads, a few ms.
const dumpRecvBuf = 64 << 10

// dumpConn is a netlink socket for dumps, with the one receive buffer all
// of them reuse: a read-back makes several dumps, and the watchdog reads
// back every poll the generation moved, and at least every third, for the
// task's whole life.
type dumpConn struct {
	c   *netlink.Conn
	buf []byte
}

func (d *dumpConn) Close() error { return d.c.Close() }

// dump sends a NLM_F_DUMP request and calls fn with the payload (after the
// nlmsghdr) of every reply message. The payload is only valid during the
// call: the receive buffer is reused.
func dump(d *dumpConn, msgType uint16, data []byte, fn func(payload []byte) error) error {
	c := d.c
	req, err := c.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(msgType), Flags: netlink.Request | netlink.Dump},
		Data:   data,
	})
	if err != nil {
		return fmt.Errorf("send dump request: %w", err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	if d.buf == nil {
		d.buf = make([]byte, dumpRecvBuf)
	}
	buf := d.buf
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
		}); err != nil {
			return err
		}
		if rerr != nil {
			return fmt.Errorf("receive dump: %w", rerr)
		}
		b := buf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(binary.NativeEndian.Uint32(b))
			typ := binary.NativeEndian.Uint16(b[4:])
			flags := binary.NativeEndian.Uint16(b[6:])
			seq := binary.NativeEndian.Uint32(b[8:])
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return errors.New("receive dump: malformed netlink message")
			}
			payload := b[unix.NLMSG_HDRLEN:l]
			if seq != req.Header.Sequence {
				return fmt.Errorf("receive dump: sequence %d, want %d", seq, req.Header.Sequence)
			}
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(payload) < 4 {
					return errors.New("receive dump: short error message")
				}
				if e := int32(binary.NativeEndian.Uint32(payload)); e != 0 {
					return fmt.Errorf("dump: %w", unix.Errno(-e))
				}
				return nil
			}
			if flags&unix.NLM_F_DUMP_INTR != 0 {
				// The ruleset changed while we read: the dump may
				// mix generations. Say so rather than diff garbage.
				return errors.New("dump interrupted by a concurrent ruleset change (NLM_F_DUMP_INTR): read again")
			}
			if err := fn(payload); err != nil {
				return err
			}
			b = b[(l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1):]
		}
	}
}
