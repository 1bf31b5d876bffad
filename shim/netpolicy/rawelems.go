package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftElemCatchall is NFT_SET_ELEM_CATCHALL: the element matches every key.
const nftElemCatchall = 0x2

// dumpElems lists a set's elements straight from nf_tables netlink
// (NFT_MSG_GETSETELEM dump). google/nftables' GetSetElements decodes each
// element through several allocating attribute decoders and ignores the
// catch-all flag; this walks the attributes in place.
//
// odd maps the index of each element that carries anything but a key and at
// most one counter (another expression, an object reference, an attribute
// this package does not know) to what it carries: a quota or limit on an
// element ends every rule that matches it once spent.
func dumpElems(c *dumpConn, table, set string, hint int) (elems []elem, odd map[int]string, err error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set + "\x00")},
	})
	if err != nil {
		return nil, nil, err
	}
	hint = min(hint, 1<<16)
	elems = make([]elem, 0, hint)
	var counters []expr.Counter // one allocation for many; only used sets' elements have one
	var keys []byte             // copies of the keys, likewise
	err = dump(c, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETSETELEM, append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...), func(m []byte) error {
		if len(m) < 4 {
			return nil
		}
		for a := range attrsOf(m[4:]) {
			if a.typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			for le := range attrsOf(a.data) {
				e, ctr, carries, err := decodeElem(le.data)
				if err != nil {
					return fmt.Errorf("decode element of set %s: %w", set, err)
				}
				if carries != "" {
					if odd == nil {
						odd = map[int]string{}
					}
					odd[len(elems)] = carries
				}
				// The receive buffer is reused: copy what we keep.
				if e.Key != nil {
					if len(keys)+len(e.Key) > cap(keys) {
						keys = make([]byte, 0, max(16<<10, len(e.Key)))
					}
					keys = append(keys, e.Key...)
					e.Key = keys[len(keys)-len(e.Key) : len(keys) : len(keys)]
				}
				if ctr != nil {
					if len(counters) == cap(counters) {
						counters = make([]expr.Counter, 0, max(256, hint-len(elems)))
					}
					counters = append(counters, *ctr)
					e.Counter = &counters[len(counters)-1]
				}
				elems = append(elems, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dump elements of set %s: %w", set, err)
	}
	return elems, odd, nil
}

// Set attributes x/sys/unix lacks: the expressions a set gives each
// element, one (NFTA_SET_EXPR) or a list (NFTA_SET_EXPRESSIONS).
const (
	nftaSetExpr        = 17
	nftaSetExpressions = 18
)

// dumpSetExprs names, for each set of table, the expressions the set gives
// its elements (NFT_MSG_GETSET dump). google/nftables v0.3.0 decodes no
// set expression: a used set that counted nothing would read back like one
// that counts.
func dumpSetExprs(c *dumpConn, table string) (map[string][]string, error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_SET_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	err = dump(c, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETSET, append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...), func(m []byte) error {
		if len(m) < 4 {
			return nil
		}
		var name, tbl string
		var exprs []string
		for a := range attrsOf(m[4:]) {
			switch a.typ {
			case unix.NFTA_SET_TABLE:
				tbl = cstring(a.data)
			case unix.NFTA_SET_NAME:
				name = cstring(a.data)
			case nftaSetExpr:
				exprs = append(exprs, setExpr(a.data))
			case nftaSetExpressions:
				for x := range attrsOf(a.data) {
					exprs = append(exprs, setExpr(x.data))
				}
			}
		}
		if tbl == table {
			out[name] = exprs
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump sets: %w", err)
	}
	return out, nil
}

// setExpr names a set's expression: "counter" for a counter at zero, with
// its values otherwise (the kernel copies the template's values into every
// element it adds, so a set counter that does not start at zero forges
// every count).
func setExpr(b []byte) string {
	c, ok := counterExpr(b)
	switch {
	case !ok:
		return exprName(b)
	case c.Packets != 0 || c.Bytes != 0:
		return fmt.Sprintf("counter packets %d bytes %d", c.Packets, c.Bytes)
	}
	return "counter"
}

// exprName is the NFTA_EXPR_NAME of an expression.
func exprName(b []byte) string {
	for a := range attrsOf(b) {
		if a.typ == unix.NFTA_EXPR_NAME {
			return cstring(a.data)
		}
	}
	return "unnamed expression"
}

// decodeElem decodes one element; its counter, if any, is returned apart so
// the caller can place it without an allocation per element. carries says
// what else the element holds, if anything: data, a key end, an interval
// end, a timeout, expressions other than one counter, or attributes not
// decoded here.
func decodeElem(b []byte) (e elem, ctr *expr.Counter, carries string, err error) {
	var exprs, other []string
	var unknown []uint16
	for a := range attrsOf(b) {
		switch a.typ {
		case unix.NFTA_SET_ELEM_KEY:
			e.Key = dataValue(a.data)
		case nftables.NFTA_SET_ELEM_KEY_END:
			other = append(other, "a key end")
		case unix.NFTA_SET_ELEM_DATA:
			other = append(other, "data") // a value, a verdict or anything else
		case unix.NFTA_SET_ELEM_FLAGS:
			if len(a.data) != 4 {
				return e, nil, "", errors.New("bad flags attribute")
			}
			f := binary.BigEndian.Uint32(a.data)
			if f&unix.NFT_SET_ELEM_INTERVAL_END != 0 {
				other = append(other, "an interval end")
			}
			if f&nftElemCatchall != 0 {
				e.Key = nil // rendered as "a catch-all element"
			}
		case unix.NFTA_SET_ELEM_TIMEOUT, unix.NFTA_SET_ELEM_EXPIRATION:
			other = append(other, "a timeout") // presence is what matters
		case unix.NFTA_SET_ELEM_USERDATA, unix.NFTA_SET_ELEM_PAD:
			// A comment, and padding: nothing the kernel acts on.
		case unix.NFTA_SET_ELEM_EXPR:
			exprs = append(exprs, exprName(a.data))
			if c, ok := counterExpr(a.data); ok {
				ctr = &c
			}
		case nftables.NFTA_SET_ELEM_EXPRESSIONS:
			for x := range attrsOf(a.data) {
				exprs = append(exprs, exprName(x.data))
				if c, ok := counterExpr(x.data); ok {
					ctr = &c
				}
			}
		default:
			unknown = append(unknown, a.typ)
		}
	}
	if len(other) > 0 {
		carries = strings.Join(slices.Compact(other), ", ")
	}
	if len(exprs) > 1 || (len(exprs) == 1 && ctr == nil) {
		carries = strings.TrimSpace(fmt.Sprintf("%s expressions %v", carries, exprs))
	}
	if len(unknown) > 0 {
		carries = strings.TrimSpace(fmt.Sprintf("%s attributes %v", carries, unknown))
	}
	return e, ctr, carries, nil
}

// dataValue returns the NFTA_DATA_VALUE inside a nested data attribute.
func dataValue(b []byte) []byte {
	for a := range attrsOf(b) {
		if a.typ == unix.NFTA_DATA_VALUE {
			return a.data
		}
	}
	return nil
}

// counterExpr decodes a {NFTA_EXPR_NAME "counter", NFTA_EXPR_DATA} pair.
func counterExpr(b []byte) (expr.Counter, bool) {
	var name string
	var data []byte
	for a := range attrsOf(b) {
		switch a.typ {
		case unix.NFTA_EXPR_NAME:
			name = cstring(a.data)
		case unix.NFTA_EXPR_DATA:
			data = a.data
		}
	}
	var c expr.Counter
	if name != "counter" {
		return c, false
	}
	for a := range attrsOf(data) {
		if len(a.data) != 8 {
			continue
		}
		switch a.typ {
		case unix.NFTA_COUNTER_BYTES:
			c.Bytes = binary.BigEndian.Uint64(a.data)
		case unix.NFTA_COUNTER_PACKETS:
			c.Packets = binary.BigEndian.Uint64(a.data)
		}
	}
	return c, true
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

type attr struct {
	typ  uint16 // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
	data []byte
}

// u32 is a's value as the big-endian 32-bit number nf_tables sends for a
// register, length, operation or flags; any other size is an error.
func (a attr) u32() (uint32, error) {
	if len(a.data) != 4 {
		return 0, fmt.Errorf("attribute %d has %d bytes", a.typ, len(a.data))
	}
	return binary.BigEndian.Uint32(a.data), nil
}

// attrsOf iterates netlink attributes in b without copying; it stops at the
// first malformed header.
func attrsOf(b []byte) func(func(attr) bool) {
	return func(yield func(attr) bool) {
		for len(b) >= 4 {
			n := int(binary.NativeEndian.Uint16(b))
			typ := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
			if n < 4 || n > len(b) {
				return
			}
			if !yield(attr{typ: typ, data: b[4:n]}) {
				return
			}
			n = (n + 3) &^ 3
			if n > len(b) {
				return
			}
			b = b[n:]
		}
	}
}
