package netpolicy

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A namespace's nf_tables generation id (NFT_MSG_GETGEN) moves with every
// committed transaction of any table there, not with the dataplane's own
// updates (a counter, a rule's add to a dynamic set) nor with a batch that
// aborts. A read-back reads it before and after its dumps (Matched).
//
// The same generation before, after and later says no transaction
// committed in between. It does not prove the table unchanged, because the
// dumps are lock-free: a batch's in-place changes (a table woken from
// dormant) are visible while the batch runs and vanish if it aborts, and a
// commit moves the generation before it applies its changes (a chain's
// policy), so a read-back may match a state the generation never had. The
// table watcher uses it only to space out its read-backs between two full
// ones (evidence.TableWatcher), never as proof that the table still
// matches.

// GenConn reads a namespace's generation on one lasting socket.
type GenConn struct{ d *dumpConn }

// OpenGen opens a GenConn in the namespace netnsFD refers to.
func OpenGen(netnsFD int) (*GenConn, error) {
	k, err := newNetlinkKernel(netnsFD)
	if err != nil {
		return nil, err
	}
	d, err := k.rawConn()
	if err != nil {
		return nil, err
	}
	return &GenConn{d: d}, nil
}

// Read returns the namespace's generation id now.
func (g *GenConn) Read() (uint32, error) { return readGen(g.d) }

// Close closes the socket.
func (g *GenConn) Close() error { return g.d.Close() }

// readGen asks for the generation (NFT_MSG_GETGEN) and decodes the
// NFT_MSG_NEWGEN answer's NFTA_GEN_ID.
func readGen(d *dumpConn) (uint32, error) {
	msgs, err := d.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("read nf_tables generation: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN) || len(m.Data) < 4 {
			continue
		}
		for a := range attrsOf(m.Data[4:]) {
			if a.typ == unix.NFTA_GEN_ID {
				return a.u32()
			}
		}
	}
	return 0, errors.New("read nf_tables generation: no NFTA_GEN_ID in the answer")
}
