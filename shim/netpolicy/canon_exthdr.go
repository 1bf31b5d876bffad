package netpolicy

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// decodeExthdr accepts only a load into a register (an IPv4 option or IPv6
// extension header lookup, `exists` included): a write (NFTA_EXTHDR_SREG),
// an unknown attribute or a type of the wrong size is an error, so it never
// reads as the plan. The operation and flags are kept as sent, so a TCP
// option or a missing presence flag differs from the plan.
func decodeExthdr(data []byte) (*expr.Exthdr, error) {
	x := &expr.Exthdr{}
	for a := range attrsOf(data) {
		if a.typ == unix.NFTA_EXTHDR_TYPE {
			if len(a.data) != 1 {
				return nil, fmt.Errorf("type has %d bytes", len(a.data))
			}
			x.Type = a.data[0]
			continue
		}
		v, err := a.u32()
		if err != nil {
			return nil, err
		}
		switch a.typ {
		case unix.NFTA_EXTHDR_DREG:
			x.DestRegister = v
		case unix.NFTA_EXTHDR_OFFSET:
			x.Offset = v
		case unix.NFTA_EXTHDR_LEN:
			x.Len = v
		case unix.NFTA_EXTHDR_FLAGS:
			x.Flags = v
		case unix.NFTA_EXTHDR_OP:
			x.Op = expr.ExthdrOp(v)
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	return x, nil
}
