package spec

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// Validate checks every rule of docs/design.md §4 and returns all broken ones as
// ValidationErrors, with JSON paths relative to the contract.
func (c *Contract) Validate() error {
	p := newProblems()
	c.check(p)
	return p.err()
}

func (c *Contract) check(p problems) {
	checkID(p, "id", "contract id", c.ID)
	if c.Version == 0 {
		p.add("version", "is required: an integer of at least 1")
	} else if c.Version < 1 {
		p.addf("version", "%d: must be at least 1", c.Version)
	}
	c.Network.check(p)
	if msg := checkWorkspace(c.Workspace); msg != "" {
		p.add("workspace", msg)
	}
	if c.Deadline != "" {
		checkDuration(p, "deadline", c.Deadline)
	}
	checkProducts(p, c.Products)
	switch c.Unclaimed {
	case "", UnclaimedCount, UnclaimedFail:
	default:
		p.addf("unclaimed", "%q is not an unclaimed-change policy: use \"count\" (the default: changes outside the products are counted) or \"fail\" (they fail the gate)", truncate(c.Unclaimed, 80))
	}
	checkCapabilities(p, c.Capabilities)
}

// checkWorkspace returns why w is not an absolute clean path, or "".
// Empty means the default "/".
func checkWorkspace(w string) string {
	q := fmt.Sprintf("%q", truncate(w, 80))
	switch {
	case w == "":
		return ""
	case len(w) > maxPathLen:
		return fmt.Sprintf("is %d bytes, at most %d allowed", len(w), maxPathLen)
	case !strings.HasPrefix(w, "/"):
		return q + " must be an absolute path in the container, such as \"/workspace\""
	case strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return q + " contains a control character"
	case path.Clean(w) != w:
		return fmt.Sprintf("%s is not a clean path; write %q", q, path.Clean(w))
	}
	return ""
}

// WorkspaceOrDefault returns the contract's workspace, "/" when unset.
func (c *Contract) WorkspaceOrDefault() string {
	if c.Workspace == "" {
		return "/"
	}
	return c.Workspace
}

// FailUnclaimed reports whether changes outside the declared products,
// exclusions and mount stubs fail the gate (unclaimed "fail").
func (c *Contract) FailUnclaimed() bool { return c.Unclaimed == UnclaimedFail }

// DeadlineDuration returns the contract's deadline, 0 when unset. It errors
// only for a contract that did not validate.
func (c *Contract) DeadlineDuration() (time.Duration, error) {
	if c.Deadline == "" {
		return 0, nil
	}
	d, err := parseDuration(c.Deadline)
	if err != nil {
		return 0, fmt.Errorf("contract %s: deadline: %w", c.ID, err)
	}
	return d, nil
}
