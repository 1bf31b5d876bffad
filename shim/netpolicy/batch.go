package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The install batch is one buffer this package writes itself. google/nftables
// v0.3.0 encodes each set element through three or four allocating
// attribute marshals and copies every message twice more on Flush: for
// 10,000 tuples some 31,000 objects and 5 MB, whose garbage collection
// was about a sixth of P2. The library still encodes everything but the
// elements: it queues its messages on a Conn dialed with WithTestDial,
// which hands them here on Flush instead of sending them (libraryMsgs).
// That option is meant for tests; a library upgrade that changed what it
// hands over fails TestBatchElementsMatchLibrary or the root tests (every
// install is read back, TestRootNftScriptMatchesPlan compares with nft).

// libraryMsgs returns the messages add queues on a google/nftables Conn,
// as the library encodes them, unsent.
func libraryMsgs(add func(c *nftables.Conn)) ([]netlink.Message, error) {
	var msgs []netlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if req == nil { // Flush waiting for acks: there are none
			return nil, io.EOF
		}
		msgs = append(msgs, req...)
		return nil, nil
	}))
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	add(c)
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	// Flush wrapped them in its own batch begin and end.
	if len(msgs) < 2 {
		return nil, errors.New("encode batch: no messages")
	}
	return msgs[1 : len(msgs)-1], nil
}

// batchBuf is a netlink batch being written: begin, messages, end.
type batchBuf struct {
	b   []byte
	seq uint32
}

func newBatchBuf(size int) *batchBuf {
	w := &batchBuf{b: make([]byte, 0, size)}
	w.msg(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES))
	return w
}

// nfgen is a struct nfgenmsg: family, version, resource id (big endian).
func nfgen(family byte, res uint16) []byte {
	return []byte{family, unix.NFNETLINK_V0, byte(res >> 8), byte(res)}
}

// header starts a message of typ; its length is set by end.
func (w *batchBuf) header(typ, flags uint16) int {
	w.seq++
	at := len(w.b)
	var h [unix.NLMSG_HDRLEN]byte
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], w.seq)
	w.b = append(w.b, h[:]...)
	return at
}

func (w *batchBuf) end(at int) {
	binary.NativeEndian.PutUint32(w.b[at:], uint32(len(w.b)-at))
	w.pad()
}

func (w *batchBuf) pad() {
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}

func (w *batchBuf) msg(typ, flags uint16, data []byte) {
	at := w.header(typ, flags)
	w.b = append(w.b, data...)
	w.end(at)
}

// library appends messages the library encoded, without their acks: the
// kernel reports a failing message whether or not it asked for one.
func (w *batchBuf) library(msgs []netlink.Message) {
	for _, m := range msgs {
		w.msg(uint16(m.Header.Type), uint16(m.Header.Flags&^netlink.Acknowledge), m.Data)
	}
}

// attr starts a netlink attribute; endAttr sets its length.
func (w *batchBuf) attr(typ uint16) int {
	at := len(w.b)
	w.b = binary.NativeEndian.AppendUint16(w.b, 0)
	w.b = binary.NativeEndian.AppendUint16(w.b, typ)
	return at
}

func (w *batchBuf) endAttr(at int) {
	binary.NativeEndian.PutUint16(w.b[at:], uint16(len(w.b)-at))
	w.pad()
}

func (w *batchBuf) attrBytes(typ uint16, data []byte) {
	at := w.attr(typ)
	w.b = append(w.b, data...)
	w.endAttr(at)
}

// elements appends one NFT_MSG_NEWSETELEM of keys for set s, encoded as
// google/nftables' SetAddElements encodes key-only elements: the set by
// name and id, its table, and a list of {key {value}}.
func (w *batchBuf) elements(s *nftables.Set, keys []elem) {
	at := w.header(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSETELEM, unix.NLM_F_REQUEST|unix.NLM_F_CREATE)
	w.b = append(w.b, nfgen(byte(s.Table.Family), 0)...)
	w.attrBytes(unix.NFTA_SET_ELEM_LIST_SET, []byte(s.Name+"\x00"))
	w.attrBytes(unix.NFTA_SET_ELEM_LIST_SET_ID, binary.BigEndian.AppendUint32(nil, s.ID))
	w.attrBytes(unix.NFTA_SET_ELEM_LIST_TABLE, []byte(s.Table.Name+"\x00"))
	list := w.attr(unix.NFTA_SET_ELEM_LIST_ELEMENTS | unix.NLA_F_NESTED)
	for i, e := range keys {
		el := w.attr(uint16(i+1) | unix.NLA_F_NESTED)
		key := w.attr(unix.NFTA_SET_ELEM_KEY | unix.NLA_F_NESTED)
		w.attrBytes(unix.NFTA_DATA_VALUE, e.Key)
		w.endAttr(key)
		w.endAttr(el)
	}
	w.endAttr(list)
	w.end(at)
}

// finish appends the batch end.
func (w *batchBuf) finish() {
	w.msg(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, nfgen(unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES))
}

// installBatch is rs as one batch: the table, its counters and its sets
// (the library's encoding), the sets' elements (maxElemsPerMsg a message),
// then its chains and rules (the library's).
func installBatch(rs *ruleset) (*batchBuf, error) {
	var setErr error
	head, err := libraryMsgs(func(c *nftables.Conn) {
		// CreateTable sends NLM_F_EXCL: a table of the same name (another
		// operation whose id shares the 12-character prefix, or a leftover)
		// makes the whole batch fail instead of merging into it.
		c.CreateTable(rs.table)
		for _, o := range rs.counters {
			c.AddObj(o)
		}
		for _, s := range rs.sets {
			if err := c.AddSet(s.set, nil); err != nil && setErr == nil {
				setErr = fmt.Errorf("add set %s: %w", s.set.Name, err)
			}
		}
	})
	if err == nil {
		err = setErr
	}
	if err != nil {
		return nil, err
	}
	tail, err := libraryMsgs(func(c *nftables.Conn) {
		for _, ch := range rs.chains {
			c.AddChain(ch)
		}
		for _, r := range rs.rules {
			c.AddRule(r.nft)
		}
	})
	if err != nil {
		return nil, err
	}
	w := newBatchBuf(batchBytes(rs))
	w.library(head)
	for _, s := range rs.sets {
		for i := 0; i < len(s.elems); i += maxElemsPerMsg {
			w.elements(s.set, s.elems[i:min(i+maxElemsPerMsg, len(s.elems))])
		}
	}
	w.library(tail)
	w.finish()
	return w, nil
}

// sendBatch writes batch w on d's socket, then a generation request, and
// returns the first error the kernel reported, as its errno. The messages
// carry no NLM_F_ACK: nfnetlink reports a refused message whether or not it
// asked for an ack, and runs the whole batch (commit or abort) within the
// write that sent it, so every answer the batch caused is queued before the
// generation request's. Success is only the kernel's word: Apply reads the
// table back.
func sendBatch(d *dumpConn, w *batchBuf) error {
	rc, err := d.c.SyscallConn()
	if err != nil {
		return err
	}
	sync := &batchBuf{seq: w.seq}
	sync.msg(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETGEN, unix.NLM_F_REQUEST, nfgen(unix.AF_UNSPEC, 0))
	for _, b := range [][]byte{w.b, sync.b} {
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			_, werr = unix.Write(int(fd), b)
			return werr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if werr != nil {
			return fmt.Errorf("send batch: %w", werr)
		}
	}
	return batchReplies(d, rc, sync.seq)
}

// batchReplies reads the kernel's answers up to the one numbered syncSeq
// and returns the first error among them.
func batchReplies(d *dumpConn, rc syscall.RawConn, syncSeq uint32) error {
	if d.buf == nil {
		d.buf = make([]byte, dumpRecvBuf)
	}
	var first error
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), d.buf, 0)
			return rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
		}); err != nil {
			return err
		}
		if rerr != nil {
			return fmt.Errorf("receive batch answer: %w", rerr)
		}
		for b := d.buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return errors.New("receive batch answer: malformed netlink message")
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			seq := binary.NativeEndian.Uint32(b[8:])
			if typ == unix.NLMSG_ERROR && l >= unix.NLMSG_HDRLEN+4 && first == nil {
				if e := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:])); e != 0 {
					first = fmt.Errorf("kernel refused message %d of the batch: %w", seq, unix.Errno(-e))
				}
			}
			if seq == syncSeq {
				return first
			}
			b = b[min((l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1), len(b)):]
		}
	}
}
