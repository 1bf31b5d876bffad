package nflog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/shim/netpolicy"
)

// nfnetlink_log constants x/sys/unix lacks (linux/netfilter/nfnetlink_log.h).
const (
	msgPacket = 0 // NFULNL_MSG_PACKET
	msgConfig = 1 // NFULNL_MSG_CONFIG

	attrPacketHdr = 1  // NFULA_PACKET_HDR
	attrTimestamp = 3  // NFULA_TIMESTAMP {be64 sec; be64 usec}
	attrPayload   = 9  // NFULA_PAYLOAD, the L3 packet
	attrPrefix    = 10 // NFULA_PREFIX, NUL-terminated
	attrUID       = 11 // NFULA_UID, be32

	cfgCmd     = 1 // NFULA_CFG_CMD {u8 command}
	cfgMode    = 2 // NFULA_CFG_MODE {be32 copy_range; u8 copy_mode; u8 pad}
	cfgTimeout = 4 // NFULA_CFG_TIMEOUT, be32, 1/100 s
	cfgQThresh = 5 // NFULA_CFG_QTHRESH, be32

	cmdBind     = 1 // NFULNL_CFG_CMD_BIND
	cmdPFBind   = 3 // NFULNL_CFG_CMD_PF_BIND
	cmdPFUnbind = 4 // NFULNL_CFG_CMD_PF_UNBIND
	copyPacket  = 2 // NFULNL_COPY_PACKET
)

// packetType is the header type of a logged packet.
var packetType = netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | msgPacket)

// Attempt is one logged (denied) packet.
type Attempt struct {
	At     time.Time // kernel timestamp if the packet had one, else receive time
	Target string    // destination as netpolicy.Tuple prints it: "ip:port/proto", "ip proto"
	Prefix string    // the log rule's prefix, as the rule wrote it
	Addr   netip.Addr
	Proto  uint8
	Port   uint16 // 0 without ports (ICMP, a later fragment)
	UID    uint32 // the socket's owner, when HasUID
	HasUID bool
}

var errNotPacket = errors.New("not an nflog packet message")

// parseMessage decodes one NFULNL_MSG_PACKET message of group. recv is used
// when the packet carries no timestamp (locally sent packets usually don't).
func parseMessage(m netlink.Message, group uint16, recv time.Time) (Attempt, error) {
	var a Attempt
	if m.Header.Type != packetType {
		return a, errNotPacket
	}
	if len(m.Data) < 4 {
		return a, fmt.Errorf("nflog message: %d bytes, short of its nfgenmsg header", len(m.Data))
	}
	if g := binary.BigEndian.Uint16(m.Data[2:4]); g != group {
		return a, fmt.Errorf("nflog message for group %d, listening on %d", g, group)
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return a, fmt.Errorf("nflog message: %w", err)
	}
	a.At = recv
	var payload []byte
	for ad.Next() {
		b := ad.Bytes()
		switch ad.Type() {
		case attrTimestamp:
			if len(b) == 16 {
				sec, usec := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
				if sec != 0 && sec < 1<<40 && usec < 1e6 {
					a.At = time.Unix(int64(sec), int64(usec)*1e3)
				}
			}
		case attrPrefix:
			a.Prefix = strings.TrimRight(string(b), "\x00")
		case attrUID:
			if len(b) == 4 {
				a.UID, a.HasUID = binary.BigEndian.Uint32(b), true
			}
		case attrPayload:
			payload = b
		}
	}
	if err := ad.Err(); err != nil {
		return a, fmt.Errorf("nflog message: %w", err)
	}
	if payload == nil {
		return a, errors.New("nflog message without payload: the group's copy mode is not packet")
	}
	if a.Addr, a.Proto, a.Port, err = parsePacket(payload); err != nil {
		return a, err
	}
	a.Target = netpolicy.Tuple{Addr: a.Addr, Proto: a.Proto, Port: a.Port}.String()
	return a, nil
}

// parsePacket reads the destination address, transport protocol and
// destination port of an IPv4 or IPv6 packet (headers only; it may be cut
// at the copy range).
func parsePacket(p []byte) (netip.Addr, uint8, uint16, error) {
	if len(p) < 1 {
		return netip.Addr{}, 0, 0, errors.New("empty packet")
	}
	switch p[0] >> 4 {
	case 4:
		return parseIPv4(p)
	case 6:
		return parseIPv6(p)
	}
	return netip.Addr{}, 0, 0, fmt.Errorf("packet of IP version %d", p[0]>>4)
}

func parseIPv4(p []byte) (netip.Addr, uint8, uint16, error) {
	if len(p) < 20 {
		return netip.Addr{}, 0, 0, fmt.Errorf("ipv4 header: %d bytes", len(p))
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 {
		return netip.Addr{}, 0, 0, fmt.Errorf("ipv4 header length %d", ihl)
	}
	dst := netip.AddrFrom4([4]byte(p[16:20]))
	proto := p[9]
	fragOff := binary.BigEndian.Uint16(p[6:8]) & 0x1fff
	if fragOff != 0 {
		return dst, proto, 0, nil // a later fragment has no transport header
	}
	return dst, proto, dstPort(proto, p, ihl), nil
}

// IPv6 extension headers walked to find the transport header.
const (
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6AH       = 51
	ipv6DestOpts = 60
	maxExtHdrs   = 8
)

func parseIPv6(p []byte) (netip.Addr, uint8, uint16, error) {
	if len(p) < 40 {
		return netip.Addr{}, 0, 0, fmt.Errorf("ipv6 header: %d bytes", len(p))
	}
	dst := netip.AddrFrom16([16]byte(p[24:40]))
	next, off := p[6], 40
	for range maxExtHdrs {
		switch next {
		case ipv6HopByHop, ipv6Routing, ipv6DestOpts, ipv6AH, ipv6Fragment:
		default:
			return dst, next, dstPort(next, p, off), nil
		}
		if len(p) < off+8 {
			return dst, next, 0, nil // cut by the copy range
		}
		hdrNext := p[off]
		switch next {
		case ipv6Fragment:
			if binary.BigEndian.Uint16(p[off+2:off+4])&0xfff8 != 0 {
				return dst, hdrNext, 0, nil // a later fragment
			}
			off += 8
		case ipv6AH:
			off += (int(p[off+1]) + 2) * 4
		default:
			off += (int(p[off+1]) + 1) * 8
		}
		next = hdrNext
	}
	return dst, next, 0, nil
}

// dstPort reads the destination port of TCP, UDP, UDP-Lite and SCTP, 0 for
// anything else or a header cut short.
func dstPort(proto uint8, p []byte, off int) uint16 {
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_UDPLITE, unix.IPPROTO_SCTP:
		if off >= 0 && len(p) >= off+4 {
			return binary.BigEndian.Uint16(p[off+2 : off+4])
		}
	}
	return 0
}
