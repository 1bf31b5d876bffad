package netpolicy

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// The elements batchBuf encodes are byte for byte what google/nftables'
// SetAddElements encodes for the same key-only elements.
func TestBatchElementsMatchLibrary(t *testing.T) {
	tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: "gensee_test"}
	s := &nftables.Set{Table: tb, Name: setAllow4, ID: 7, KeyType: keyAllow4}
	var ts []Tuple
	for i := range 300 {
		ts = append(ts, Tuple{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Proto: unix.IPPROTO_TCP, Port: uint16(1024 + i)})
	}
	keys := tupleKeys(ts)
	elems := make([]elem, len(keys))
	lib := make([]nftables.SetElement, len(keys))
	for i, k := range keys {
		elems[i].Key, lib[i].Key = k, k
	}
	want, err := libraryMsgs(func(c *nftables.Conn) {
		if err := c.SetAddElements(s, lib); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil || len(want) != 1 {
		t.Fatalf("library messages = %d, %v", len(want), err)
	}
	w := &batchBuf{}
	w.elements(s, elems)
	got := w.b
	if typ := binary.NativeEndian.Uint16(got[4:]); typ != uint16(want[0].Header.Type) {
		t.Fatalf("message type %#x, want %#x", typ, want[0].Header.Type)
	}
	if l := binary.NativeEndian.Uint32(got); int(l) != len(got) || int(l) != unix.NLMSG_HDRLEN+len(want[0].Data) {
		t.Fatalf("message length %d (buffer %d), want %d", l, len(got), unix.NLMSG_HDRLEN+len(want[0].Data))
	}
	if !bytes.Equal(got[unix.NLMSG_HDRLEN:], want[0].Data) {
		t.Fatal("element message differs from the library's encoding")
	}
}
