package cli

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// socketMatch is one `socket` expression as the kernel reports it.
type socketMatch struct {
	key, level uint32
}

// dumpSocketExprs lists the `socket` expressions of every rule in inet
// table name, straight from an NFT_MSG_GETRULE dump: google/nftables v0.3.0
// does not decode `socket` when it reads rules back and silently drops it.
func dumpSocketExprs(netnsFD int, table string) ([]socketMatch, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netnsFD})
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	defer c.Close()
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETRULE),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
	})
	if err != nil {
		return nil, fmt.Errorf("dump rules: %w", err)
	}
	var out []socketMatch
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		found, err := socketExprsOfRule(m.Data[4:], table)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// socketExprsOfRule decodes one rule message; rules of other tables (older
// kernels ignore the dump filter) yield nothing.
func socketExprsOfRule(b []byte, table string) ([]socketMatch, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	ad.ByteOrder = binary.BigEndian
	var (
		out []socketMatch
		tbl string
	)
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			tbl = ad.String()
		case unix.NFTA_RULE_EXPRESSIONS:
			ad.Nested(func(list *netlink.AttributeDecoder) error {
				for list.Next() {
					list.Nested(func(e *netlink.AttributeDecoder) error {
						var name string
						var data []byte
						for e.Next() {
							switch e.Type() {
							case unix.NFTA_EXPR_NAME:
								name = e.String()
							case unix.NFTA_EXPR_DATA:
								data = e.Bytes()
							}
						}
						if name == "socket" {
							out = append(out, decodeSocket(data))
						}
						return nil
					})
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("decode rule: %w", err)
	}
	if tbl != table {
		return nil, nil
	}
	return out, nil
}

func decodeSocket(data []byte) socketMatch {
	var s socketMatch
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return s
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case expr.NFTA_SOCKET_KEY:
			s.key = ad.Uint32()
		case expr.NFTA_SOCKET_LEVEL:
			s.level = ad.Uint32()
		}
	}
	return s
}
