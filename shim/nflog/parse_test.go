package nflog

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func ipv4(proto uint8, dst string, dport uint16, fragOff uint16) []byte {
	p := make([]byte, 28)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[6:], fragOff)
	p[9] = proto
	copy(p[12:16], []byte{10, 0, 0, 1})
	a := netip.MustParseAddr(dst).As4()
	copy(p[16:20], a[:])
	binary.BigEndian.PutUint16(p[20:], 40000)
	binary.BigEndian.PutUint16(p[22:], dport)
	return p
}

func ipv6(next uint8, ext []byte, dst string, dport uint16) []byte {
	p := make([]byte, 40)
	p[0] = 0x60
	p[6] = next
	a := netip.MustParseAddr(dst).As16()
	copy(p[24:40], a[:])
	p = append(p, ext...)
	l4 := make([]byte, 8)
	binary.BigEndian.PutUint16(l4[2:], dport)
	return append(p, l4...)
}

func TestParsePacket(t *testing.T) {
	hopByHop := []byte{unix.IPPROTO_TCP, 0, 0, 0, 0, 0, 0, 0} // next tcp, 8 bytes
	firstFrag := []byte{unix.IPPROTO_UDP, 0, 0, 1, 0, 0, 0, 7}
	laterFrag := []byte{unix.IPPROTO_UDP, 0, 0x05, 0x01, 0, 0, 0, 7}
	for _, c := range []struct {
		name   string
		p      []byte
		target string
		err    bool
	}{
		{"v4 tcp", ipv4(6, "198.51.100.7", 80, 0), "198.51.100.7:80/tcp", false},
		{"v4 udp", ipv4(17, "192.0.2.2", 53, 0), "192.0.2.2:53/udp", false},
		{"v4 icmp", ipv4(1, "192.0.2.2", 0, 0), "192.0.2.2 icmp", false},
		{"v4 later fragment", ipv4(17, "192.0.2.2", 53, 0x0010), "192.0.2.2 udp", false},
		{"v4 cut before ports", ipv4(6, "192.0.2.2", 80, 0)[:21], "192.0.2.2 tcp", false},
		{"v6 tcp", ipv6(unix.IPPROTO_TCP, nil, "2001:db8::2", 8080), "[2001:db8::2]:8080/tcp", false},
		{"v6 hop-by-hop", ipv6(0, hopByHop, "2001:db8::2", 443), "[2001:db8::2]:443/tcp", false},
		{"v6 first fragment", ipv6(44, firstFrag, "2001:db8::2", 53), "[2001:db8::2]:53/udp", false},
		{"v6 later fragment", ipv6(44, laterFrag, "2001:db8::2", 53), "2001:db8::2 udp", false},
		{"v6 icmpv6", ipv6(58, nil, "2001:db8::2", 0), "2001:db8::2 icmpv6", false},
		{"short v4", []byte{0x45, 0}, "", true},
		{"bad ihl", append([]byte{0x41}, make([]byte, 30)...), "", true},
		{"short v6", []byte{0x60, 0, 0}, "", true},
		{"v5", []byte{0x50}, "", true},
		{"empty", nil, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := parseMessage(packetMessage(2604, c.p, "gensee deny x ", nil), 2604, time.Unix(5, 0))
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if err == nil && a.Target != c.target {
				t.Fatalf("target %q, want %q", a.Target, c.target)
			}
		})
	}
}

// packetMessage builds an NFULNL_MSG_PACKET as the kernel sends it.
func packetMessage(group uint16, payload []byte, prefix string, ts *time.Time) netlink.Message {
	attrs := []netlink.Attribute{
		{Type: attrPacketHdr, Data: []byte{0x08, 0x00, 3, 0}},
		{Type: attrPrefix, Data: append([]byte(prefix), 0)},
		{Type: attrUID, Data: be32(1000)},
	}
	if ts != nil {
		b := binary.BigEndian.AppendUint64(nil, uint64(ts.Unix()))
		b = binary.BigEndian.AppendUint64(b, uint64(ts.Nanosecond()/1000))
		attrs = append(attrs, netlink.Attribute{Type: attrTimestamp, Data: b})
	}
	if payload != nil {
		attrs = append(attrs, netlink.Attribute{Type: attrPayload, Data: payload})
	}
	ab, _ := netlink.MarshalAttributes(attrs)
	hdr := []byte{unix.AF_INET, 0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], group)
	return netlink.Message{Header: netlink.Header{Type: packetType}, Data: append(hdr, ab...)}
}

func TestParseMessage(t *testing.T) {
	ts := time.Date(2026, 11, 29, 10, 0, 0, 123456000, time.UTC)
	recv := time.Unix(5, 0)
	a, err := parseMessage(packetMessage(7, ipv4(6, "198.51.100.7", 80, 0), "gensee deny 0f3a9c1d2e4b ", &ts), 7, recv)
	if err != nil {
		t.Fatal(err)
	}
	if !a.At.Equal(ts) || a.Prefix != "gensee deny 0f3a9c1d2e4b " || !a.HasUID || a.UID != 1000 || a.Port != 80 || a.Proto != 6 {
		t.Fatalf("attempt %+v", a)
	}
	a, err = parseMessage(packetMessage(7, ipv4(6, "198.51.100.7", 80, 0), "p", nil), 7, recv)
	if err != nil || !a.At.Equal(recv) {
		t.Fatalf("no timestamp: at %v, %v; want receive time", a.At, err)
	}
	if _, err := parseMessage(packetMessage(8, ipv4(6, "198.51.100.7", 80, 0), "p", nil), 7, recv); err == nil {
		t.Error("message of another group accepted")
	}
	if _, err := parseMessage(packetMessage(7, nil, "p", nil), 7, recv); err == nil {
		t.Error("message without payload accepted")
	}
	if _, err := parseMessage(netlink.Message{Header: netlink.Header{Type: packetType}, Data: []byte{2}}, 7, recv); err == nil {
		t.Error("short message accepted")
	}
	cfg := configMessage(unix.AF_UNSPEC, 7)
	if _, err := parseMessage(cfg, 7, recv); err != errNotPacket {
		t.Errorf("config message: %v, want errNotPacket", err)
	}
}

// FuzzParseMessage: container-controlled packets and whatever the socket
// delivers never panic the parser, and a parsed attempt is well-formed.
func FuzzParseMessage(f *testing.F) {
	f.Add(packetMessage(1, ipv4(6, "198.51.100.7", 80, 0), "gensee deny x ", nil).Data)
	f.Add(packetMessage(1, ipv6(0, []byte{6, 0, 0, 0, 0, 0, 0, 0}, "2001:db8::2", 443), "", nil).Data)
	f.Add(packetMessage(1, ipv6(44, []byte{17, 0, 0, 1, 0, 0, 0, 7}, "2001:db8::2", 53), "", nil).Data)
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseMessage(netlink.Message{Header: netlink.Header{Type: packetType}, Data: data}, 1, time.Unix(5, 0))
		if err == nil && (!a.Addr.IsValid() || a.Target == "") {
			t.Fatalf("attempt without destination: %+v", a)
		}
		parsePacket(data)
	})
}
