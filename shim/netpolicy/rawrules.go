package netpolicy

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// dumpRules lists the rules of a table straight from nf_tables netlink
// (NFT_MSG_GETRULE dump) and decodes them with decodeExpr.
func dumpRules(c *dumpConn, table string) ([]*rule, error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return nil, err
	}
	var rules []*rule
	err = dump(c, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETRULE, append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...), func(m []byte) error {
		if len(m) < 4 {
			return nil
		}
		r, tbl, err := decodeRule(m[4:])
		if err != nil {
			return err
		}
		if tbl == table { // older kernels ignore the table filter
			r.userData = slices.Clone(r.userData) // the buffer is reused
			rules = append(rules, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump rules: %w", err)
	}
	return rules, nil
}

func decodeRule(b []byte) (*rule, string, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, "", err
	}
	ad.ByteOrder = binary.BigEndian
	r := &rule{}
	var table string
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			table = ad.String()
		case unix.NFTA_RULE_CHAIN:
			r.chain = ad.String()
		case unix.NFTA_RULE_HANDLE:
			r.handle = ad.Uint64()
		case unix.NFTA_RULE_USERDATA:
			r.userData = ad.Bytes()
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
						r.exprs = append(r.exprs, decodeExpr(name, data))
						return nil
					})
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return nil, "", fmt.Errorf("decode rule: %w", err)
	}
	return r, table, nil
}
