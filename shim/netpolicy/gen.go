package netpolicy

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A namespace's nf_tables generation id (NFT_MSG_GETGEN) moves with every
// committed change of any table there; the dataplane's own updates (a
// counter, a rule's add to a dynamic set) do not move it. A read-back
// that found the table equal to its plan, with the generation the same
// before and after it, says the table matches its plan for as long as the
// generation stays: a watcher then need not read the table back again
// until it moves (GenConn).

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
