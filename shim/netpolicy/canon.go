package netpolicy

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Rules are compared in a canonical text form. Dumped rules are decoded
// here, not by google/nftables: v0.3.0 silently drops expressions it has no
// decoder for — "socket" among them — so a rule read back through GetRules
// would look the same whether its cgroup match were level 1, level 5 or
// gone. Every expression in a dump is accounted for: one this package does
// not use renders as "unknown <name> <hex>" and never equals the plan.

// canonRule is a built rule, its canonical form rendered on first use
// (canonExprs): install and the counters' read need none of it.
func canonRule(r *nftables.Rule) *rule {
	return &rule{chain: r.Chain.Name, userData: r.UserData, nft: r}
}

// canonExprs is the rule's expressions in canonical form: a dumped rule's,
// decoded with it; a built rule's, rendered now if not yet.
func (r *rule) canonExprs() []string {
	if r.exprs == nil && r.nft != nil {
		r.exprs = make([]string, 0, len(r.nft.Exprs))
		for _, e := range r.nft.Exprs {
			r.exprs = append(r.exprs, canon(e))
		}
	}
	return r.exprs
}

// canon renders an expression, leaving out what the kernel does not echo (a
// lookup's batch-local set id) and what changes at run time (counter values).
func canon(e expr.Any) string {
	switch v := e.(type) {
	case *expr.Lookup:
		c := *v
		c.SetID = 0
		e = &c
	case *expr.Counter:
		e = &expr.Counter{}
	case *expr.Dynset:
		// Its expressions render canonically too, not as the pointers
		// %+v prints.
		c := *v
		c.SetID, c.Exprs = 0, nil
		s := fmt.Sprintf("Dynset%+v", c)
		for _, x := range v.Exprs {
			s += " with " + canon(x)
		}
		return s
	}
	return fmt.Sprintf("%s%+v", reflect.TypeOf(e).Elem().Name(), reflect.ValueOf(e).Elem().Interface())
}

// decodeExpr renders one dumped expression (its NFTA_EXPR_NAME and the
// attributes inside NFTA_EXPR_DATA). The rendering is a pure function of
// those bytes, and a shim reads the same table back many times: renderings
// are kept (exprCache).
func decodeExpr(name string, data []byte) string {
	key := name + "\x00" + string(data)
	if s, ok := exprCache.get(key); ok {
		return s
	}
	s := renderExpr(name, data)
	exprCache.put(key, s)
	return s
}

// exprCache holds decodeExpr's renderings, up to exprCacheMax: a table
// someone fills with other expressions costs their renderings, never
// unbounded memory.
var exprCache = renderings{m: map[string]string{}}

const exprCacheMax = 1024

type renderings struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *renderings) get(k string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[k]
	return s, ok
}

func (r *renderings) put(k, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) < exprCacheMax {
		r.m[k] = s
	}
}

// renderExpr decodes and renders one dumped expression (decodeExpr).
func renderExpr(name string, data []byte) string {
	var e expr.Any
	switch name {
	case "socket":
		e = &expr.Socket{}
	case "lookup":
		e = &expr.Lookup{}
	case "meta":
		e = &expr.Meta{}
	case "cmp":
		e = &expr.Cmp{}
	case "payload":
		e = &expr.Payload{}
	case "ct":
		// v0.3.0's Ct decoder ignores NFTA_CT_SREG: a write (`ct
		// label set`) would read back as a load into register 0.
		c, err := decodeCt(data)
		if err != nil {
			return fmt.Sprintf("undecodable ct %s: %v", hex.EncodeToString(data), err)
		}
		return canon(c)
	case "objref":
		e = &expr.Objref{}
	case "limit":
		e = &expr.Limit{}
	case "log":
		e = &expr.Log{}
	case "counter":
		e = &expr.Counter{}
	case "immediate":
		e = &expr.Immediate{}
	case "exthdr":
		// v0.3.0's Exthdr decoder ignores attributes it does not
		// know (a write's source register among them): decoded
		// strictly here, so only a header load reads back as one.
		x, err := decodeExthdr(data)
		if err != nil {
			return fmt.Sprintf("undecodable exthdr %s: %v", hex.EncodeToString(data), err)
		}
		return canon(x)
	case "dynset":
		// v0.3.0's Dynset decoder keeps only the inversion of its
		// flags and decodes its expressions with the library's own
		// decoders, which drop what they do not know.
		d, err := decodeDynset(data)
		if err != nil {
			return fmt.Sprintf("undecodable dynset %s: %v", hex.EncodeToString(data), err)
		}
		return canon(d)
	case "byteorder":
		// v0.3.0's Byteorder has no decoder.
		b, err := decodeByteorder(data)
		if err != nil {
			return fmt.Sprintf("undecodable byteorder %s: %v", hex.EncodeToString(data), err)
		}
		return canon(b)
	case "bitwise":
		// v0.3.0's Bitwise decoder ignores NFTA_BITWISE_OP and
		// NFTA_BITWISE_DATA: a shift, or a two-register and/or/xor,
		// would read back as the mask-and-xor it is not.
		b, err := decodeBitwise(data)
		if err != nil {
			return fmt.Sprintf("undecodable bitwise %s: %v", hex.EncodeToString(data), err)
		}
		return canon(b)
	case "fib":
		// v0.3.0's Fib decoder drops what it does not know: a result
		// other than oif, oifname or type reads back as no result at
		// all, and unknown flag bits vanish.
		f, err := decodeFib(data)
		if err != nil {
			return fmt.Sprintf("undecodable fib %s: %v", hex.EncodeToString(data), err)
		}
		return canon(f)
	default:
		return fmt.Sprintf("unknown %s %s", name, hex.EncodeToString(data))
	}
	if err := expr.Unmarshal(unix.NFPROTO_INET, data, e); err != nil {
		return fmt.Sprintf("undecodable %s %s: %v", name, hex.EncodeToString(data), err)
	}
	// A verdict is an immediate into the verdict register.
	if imm, ok := e.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		if err := expr.Unmarshal(unix.NFPROTO_INET, data, v); err != nil {
			return fmt.Sprintf("undecodable verdict %s: %v", hex.EncodeToString(data), err)
		}
		e = v
	}
	return canon(e)
}

func decodeByteorder(data []byte) (*expr.Byteorder, error) {
	b := &expr.Byteorder{}
	for a := range attrsOf(data) {
		v, err := a.u32()
		if err != nil {
			return nil, err
		}
		switch a.typ {
		case unix.NFTA_BYTEORDER_SREG:
			b.SourceRegister = v
		case unix.NFTA_BYTEORDER_DREG:
			b.DestRegister = v
		case unix.NFTA_BYTEORDER_OP:
			b.Op = expr.ByteorderOp(v)
		case unix.NFTA_BYTEORDER_LEN:
			b.Len = v
		case unix.NFTA_BYTEORDER_SIZE:
			b.Size = v
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	return b, nil
}

// Bitwise attributes x/sys/unix lacks, and the one operation this package
// uses (NFT_BITWISE_BOOL, renamed NFT_BITWISE_MASK_XOR in Linux 6.13).
const (
	nftaBitwiseOp     = 6
	nftBitwiseMaskXor = 0
)

// decodeBitwise accepts only what build emits, a mask-and-xor; every other
// attribute or operation is an error, so it never reads as the plan.
func decodeBitwise(data []byte) (*expr.Bitwise, error) {
	b := &expr.Bitwise{}
	for a := range attrsOf(data) {
		switch a.typ {
		case unix.NFTA_BITWISE_SREG, unix.NFTA_BITWISE_DREG, unix.NFTA_BITWISE_LEN, nftaBitwiseOp:
			v, err := a.u32()
			if err != nil {
				return nil, err
			}
			switch a.typ {
			case unix.NFTA_BITWISE_SREG:
				b.SourceRegister = v
			case unix.NFTA_BITWISE_DREG:
				b.DestRegister = v
			case unix.NFTA_BITWISE_LEN:
				b.Len = v
			case nftaBitwiseOp:
				if v != nftBitwiseMaskXor {
					return nil, fmt.Errorf("operation %d is not mask-and-xor", v)
				}
			}
		case unix.NFTA_BITWISE_MASK:
			b.Mask = slices.Clone(dataValue(a.data))
		case unix.NFTA_BITWISE_XOR:
			b.Xor = slices.Clone(dataValue(a.data))
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	return b, nil
}

// decodeCt accepts a load (NFTA_CT_DREG) or a write (NFTA_CT_SREG) of one
// key, as build emits them: no direction, no other attribute, never both
// registers, else an error, so it never reads as the plan.
func decodeCt(data []byte) (*expr.Ct, error) {
	c := &expr.Ct{}
	regs := 0
	for a := range attrsOf(data) {
		v, err := a.u32()
		if err != nil {
			return nil, err
		}
		switch a.typ {
		case unix.NFTA_CT_KEY:
			c.Key = expr.CtKey(v)
		case unix.NFTA_CT_DREG:
			c.Register = v
			regs++
		case unix.NFTA_CT_SREG:
			c.Register, c.SourceRegister = v, true
			regs++
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	if regs != 1 {
		return nil, fmt.Errorf("%d registers", regs)
	}
	return c, nil
}

// decodeFib accepts the fib expressions the library can express (one of
// the three results, the six flags); anything else is an error, so it never
// reads as the plan.
func decodeFib(data []byte) (*expr.Fib, error) {
	f := &expr.Fib{}
	for a := range attrsOf(data) {
		v, err := a.u32()
		if err != nil {
			return nil, err
		}
		switch a.typ {
		case unix.NFTA_FIB_DREG:
			f.Register = v
		case unix.NFTA_FIB_RESULT:
			switch v {
			case unix.NFT_FIB_RESULT_OIF:
				f.ResultOIF = true
			case unix.NFT_FIB_RESULT_OIFNAME:
				f.ResultOIFNAME = true
			case unix.NFT_FIB_RESULT_ADDRTYPE:
				f.ResultADDRTYPE = true
			default:
				return nil, fmt.Errorf("unknown result %d", v)
			}
		case unix.NFTA_FIB_FLAGS:
			const known = unix.NFTA_FIB_F_SADDR | unix.NFTA_FIB_F_DADDR | unix.NFTA_FIB_F_MARK | unix.NFTA_FIB_F_IIF | unix.NFTA_FIB_F_OIF | unix.NFTA_FIB_F_PRESENT
			if v&^known != 0 {
				return nil, fmt.Errorf("unknown flags %#x", v&^known)
			}
			f.FlagSADDR = v&unix.NFTA_FIB_F_SADDR != 0
			f.FlagDADDR = v&unix.NFTA_FIB_F_DADDR != 0
			f.FlagMARK = v&unix.NFTA_FIB_F_MARK != 0
			f.FlagIIF = v&unix.NFTA_FIB_F_IIF != 0
			f.FlagOIF = v&unix.NFTA_FIB_F_OIF != 0
			f.FlagPRESENT = v&unix.NFTA_FIB_F_PRESENT != 0
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	return f, nil
}

// decodeDynset accepts only what build emits: an add to a set by a key
// register with one counter expression at zero (a counter preset to other
// values would start every element there), no timeout, no flags and no
// data register. Anything else is an error, so it never reads as the plan.
func decodeDynset(data []byte) (*expr.Dynset, error) {
	d := &expr.Dynset{}
	for a := range attrsOf(data) {
		switch a.typ {
		case unix.NFTA_DYNSET_SET_NAME:
			d.SetName = cstring(a.data)
		case unix.NFTA_DYNSET_SREG_KEY, unix.NFTA_DYNSET_OP, unix.NFTA_DYNSET_FLAGS:
			v, err := a.u32()
			if err != nil {
				return nil, err
			}
			switch a.typ {
			case unix.NFTA_DYNSET_SREG_KEY:
				d.SrcRegKey = v
			case unix.NFTA_DYNSET_OP:
				d.Operation = v
			case unix.NFTA_DYNSET_FLAGS:
				if v != 0 {
					return nil, fmt.Errorf("flags %#x", v)
				}
			}
		case unix.NFTA_DYNSET_TIMEOUT:
			if len(a.data) != 8 || binary.BigEndian.Uint64(a.data) != 0 {
				return nil, fmt.Errorf("timeout %x", a.data)
			}
		case unix.NFTA_DYNSET_EXPR:
			c, ok := counterExpr(a.data)
			if !ok || len(d.Exprs) > 0 {
				return nil, fmt.Errorf("expression %s", exprName(a.data))
			}
			if c.Packets != 0 || c.Bytes != 0 {
				return nil, fmt.Errorf("counter preset to %d packets, %d bytes", c.Packets, c.Bytes)
			}
			d.Exprs = []expr.Any{&expr.Counter{}}
		case unix.NFTA_DYNSET_SET_ID, unix.NFTA_DYNSET_PAD:
			// The set's batch-local id, which the kernel does not
			// echo (as for a lookup), and padding.
		default:
			return nil, fmt.Errorf("unknown attribute %d", a.typ)
		}
	}
	return d, nil
}
