package netpolicy

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func attrBytes(t *testing.T, as ...netlink.Attribute) []byte {
	t.Helper()
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// exprAttr is one {NFTA_EXPR_NAME, NFTA_EXPR_DATA} expression.
func exprAttr(t *testing.T, name string, data ...netlink.Attribute) []byte {
	return attrBytes(t, netlink.Attribute{Type: unix.NFTA_EXPR_NAME, Data: []byte(name + "\x00")}, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: attrBytes(t, data...)})
}

func counterAttr(t *testing.T, packets, bytes uint64) []byte {
	return exprAttr(t, "counter",
		netlink.Attribute{Type: unix.NFTA_COUNTER_BYTES, Data: binary.BigEndian.AppendUint64(nil, bytes)},
		netlink.Attribute{Type: unix.NFTA_COUNTER_PACKETS, Data: binary.BigEndian.AppendUint64(nil, packets)})
}

// TestDecodeDynset: what the kernel dumps for the planned add decodes as
// the plan; anything else is an error or decodes as something else.
func TestDecodeDynset(t *testing.T) {
	base := []netlink.Attribute{
		{Type: unix.NFTA_DYNSET_SREG_KEY, Data: u32(1)},
		{Type: unix.NFTA_DYNSET_OP, Data: u32(unix.NFT_DYNSET_OP_ADD)},
		{Type: unix.NFTA_DYNSET_SET_NAME, Data: []byte("allow4_used\x00")},
		{Type: unix.NFTA_DYNSET_TIMEOUT, Data: make([]byte, 8)},
		{Type: unix.NFTA_DYNSET_FLAGS, Data: u32(0)},
	}
	with := func(as ...netlink.Attribute) []byte {
		return attrBytes(t, append(append([]netlink.Attribute(nil), base...), as...)...)
	}
	counter := func(p, b uint64) netlink.Attribute {
		return netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_DYNSET_EXPR, Data: counterAttr(t, p, b)}
	}
	want := canon(&expr.Dynset{SrcRegKey: 1, SetName: "allow4_used", Operation: unix.NFT_DYNSET_OP_ADD, Exprs: []expr.Any{&expr.Counter{}}})
	if got := decodeExpr("dynset", with(counter(0, 0))); got != want {
		t.Fatalf("decoded %s, want %s", got, want)
	}
	if got := decodeExpr("dynset", with()); got == want {
		t.Error("an add without its counter reads as the plan")
	}
	for _, tc := range []struct {
		name  string
		attrs []netlink.Attribute
		want  string
	}{
		{"preset counter", []netlink.Attribute{counter(7, 700)}, "counter preset to 7 packets, 700 bytes"},
		{"two counters", []netlink.Attribute{counter(0, 0), counter(0, 0)}, "expression counter"},
		{"quota", []netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_DYNSET_EXPR, Data: exprAttr(t, "quota", netlink.Attribute{Type: unix.NFTA_QUOTA_BYTES, Data: make([]byte, 8)})}}, "expression quota"},
		{"inverted", []netlink.Attribute{counter(0, 0), {Type: unix.NFTA_DYNSET_FLAGS, Data: u32(unix.NFT_DYNSET_F_INV)}}, "flags"},
		{"timeout", []netlink.Attribute{counter(0, 0), {Type: unix.NFTA_DYNSET_TIMEOUT, Data: binary.BigEndian.AppendUint64(nil, 1000)}}, "timeout"},
		{"data register", []netlink.Attribute{counter(0, 0), {Type: unix.NFTA_DYNSET_SREG_DATA, Data: u32(2)}}, "unknown attribute"},
		{"expression list", []netlink.Attribute{{Type: unix.NLA_F_NESTED | expr.NFTA_DYNSET_EXPRESSIONS, Data: attrBytes(t, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: counterAttr(t, 0, 0)})}}, "unknown attribute"},
		{"short register", []netlink.Attribute{counter(0, 0), {Type: unix.NFTA_DYNSET_SREG_KEY, Data: []byte{1}}}, "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := with(tc.attrs...)
			if _, err := decodeDynset(b); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
			if s := decodeExpr("dynset", b); !strings.HasPrefix(s, "undecodable dynset") {
				t.Errorf("rendered %q", s)
			}
		})
	}
}

// TestSetExpr: a set's counter template reads as "counter" only at zero.
func TestSetExpr(t *testing.T) {
	for _, tc := range []struct {
		expr []byte
		want string
	}{
		{counterAttr(t, 0, 0), "counter"},
		{counterAttr(t, 7, 700), "counter packets 7 bytes 700"},
		{exprAttr(t, "quota", netlink.Attribute{Type: unix.NFTA_QUOTA_BYTES, Data: make([]byte, 8)}), "quota"},
	} {
		if got := setExpr(tc.expr); got != tc.want {
			t.Errorf("setExpr = %q, want %q", got, tc.want)
		}
	}
}

// TestDecodeElemCarries: an element carrying anything but a key, flags and
// at most one counter says what (diffElems reports it).
func TestDecodeElemCarries(t *testing.T) {
	key := netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_KEY, Data: attrBytes(t, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: []byte{192, 0, 2, 1}})}
	quota := exprAttr(t, "quota", netlink.Attribute{Type: unix.NFTA_QUOTA_BYTES, Data: binary.BigEndian.AppendUint64(nil, 1)})
	for _, tc := range []struct {
		name    string
		attrs   []netlink.Attribute
		counter bool
		want    string
	}{
		{"key only", nil, false, ""},
		{"counter", []netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_EXPR, Data: counterAttr(t, 3, 180)}}, true, ""},
		{"comment", []netlink.Attribute{{Type: unix.NFTA_SET_ELEM_USERDATA, Data: []byte{0, 1, 'x'}}}, false, ""},
		{"quota", []netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_EXPR, Data: quota}}, false, "expressions [quota]"},
		{"counter and quota", []netlink.Attribute{{Type: unix.NLA_F_NESTED | nftables.NFTA_SET_ELEM_EXPRESSIONS, Data: attrBytes(t,
			netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: counterAttr(t, 0, 0)},
			netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: quota})}}, true, "expressions [counter quota]"},
		{"object reference", []netlink.Attribute{{Type: unix.NFTA_SET_ELEM_OBJREF, Data: []byte("q\x00")}}, false, "attributes [9]"},
		{"data", []netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_DATA, Data: attrBytes(t, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: []byte{1}})}}, false, "data"},
		{"verdict", []netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_DATA, Data: attrBytes(t, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_DATA_VERDICT, Data: attrBytes(t,
			netlink.Attribute{Type: unix.NFTA_VERDICT_CODE, Data: binary.BigEndian.AppendUint32(nil, 1)})})}}, false, "data"},
		{"key end", []netlink.Attribute{{Type: unix.NLA_F_NESTED | nftables.NFTA_SET_ELEM_KEY_END, Data: attrBytes(t, netlink.Attribute{Type: unix.NFTA_DATA_VALUE, Data: []byte{192, 0, 2, 9}})}}, false, "a key end"},
		{"interval end", []netlink.Attribute{{Type: unix.NFTA_SET_ELEM_FLAGS, Data: binary.BigEndian.AppendUint32(nil, unix.NFT_SET_ELEM_INTERVAL_END)}}, false, "an interval end"},
		{"timeout", []netlink.Attribute{{Type: unix.NFTA_SET_ELEM_TIMEOUT, Data: binary.BigEndian.AppendUint64(nil, 1000)}}, false, "a timeout"},
		{"timeout and quota", []netlink.Attribute{{Type: unix.NFTA_SET_ELEM_EXPIRATION, Data: binary.BigEndian.AppendUint64(nil, 1000)},
			{Type: unix.NLA_F_NESTED | unix.NFTA_SET_ELEM_EXPR, Data: quota}}, false, "a timeout expressions [quota]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ctr, carries, err := decodeElem(attrBytes(t, append([]netlink.Attribute{key}, tc.attrs...)...))
			if err != nil {
				t.Fatal(err)
			}
			if string(e.Key) != string([]byte{192, 0, 2, 1}) || (ctr != nil) != tc.counter || carries != tc.want {
				t.Errorf("key %v counter %v carries %q, want counter %v carries %q", e.Key, ctr, carries, tc.counter, tc.want)
			}
		})
	}
}
