package netpolicy

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
)

// flushConntrack empties the conntrack table of the namespace netnsFD refers
// to, so no flow that existed before the policy counts as a reply of an
// allowed one. Callers never flush their own (host) namespace: that would
// break unrelated NATed connections of the whole machine.
func flushConntrack(netnsFD int) error {
	c, err := conntrack.Dial(&netlink.Config{NetNS: netnsFD})
	if err != nil {
		return fmt.Errorf("open conntrack netlink socket: %w", err)
	}
	defer c.Close()
	if err := c.Flush(); err != nil {
		return fmt.Errorf("flush conntrack: %w", err)
	}
	return nil
}
