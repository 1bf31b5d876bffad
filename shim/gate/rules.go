package gate

import "github.com/gensee/gensee/shim/walk"

// Rule names. They appear in manifests and events; extend, never rename.
const (
	RuleSymlink         = "symlink"          // a symlink where none is allowed (never followed)
	RuleSpecialFile     = "special_file"     // fifo, socket, char or block device
	RuleHardlink        = "hardlink"         // regular file with nlink > 1
	RuleOverMaxBytes    = "over_max_bytes"   // content bytes above max_bytes (or the copy-up compare cap)
	RuleOverMaxEntries  = "over_max_entries" // more entries than max_entries (or the scan cap)
	RuleOverMaxDepth    = "over_max_depth"   // nesting deeper than max_depth (or the scan cap)
	RuleBadMode         = "bad_mode"         // permission bits not among the declared modes
	RulePartial         = "partial"          // slot exists in the image and was not freshly written
	RuleMissing         = "missing"          // nothing at the slot, or it was deleted
	RuleWrongType       = "wrong_type"       // a directory where a file is expected or the reverse
	RuleSubdirectory    = "subdirectory"     // a directory inside a blob_set
	RuleWhiteout        = "whiteout"         // a deletion inside a product directory
	RuleBadName         = "bad_name"         // newline, control char, invalid UTF-8, dots-only, .wh. prefix
	RuleInvalidJSON     = "invalid_json"     // structured_result or JSON environment_snapshot does not parse strictly
	RuleDuplicateKey    = "duplicate_key"    // a JSON object or env snapshot repeats a key
	RuleInvalidEnv      = "invalid_env"      // environment_snapshot line or value malformed
	RuleBadEnvKey       = "bad_env_key"      // key not [A-Za-z_][A-Za-z0-9_]*
	RuleChanged         = "changed"          // entry changed while the gate read it
	RuleUnreadable      = "unreadable"       // entry could not be read
	RuleExcluded        = "excluded"         // slot passes through an excluded component
	RuleUnderMount      = "under_mount"      // slot under a mount destination the gate cannot see
	RuleBadSlot         = "bad_slot"         // slot not an exact relative path
	RuleOverlappingSlot = "overlapping_slot" // two slots equal or nested
	RuleUnknownClass    = "unknown_class"    // class not in docs/design.md §4
	RuleBadContract     = "bad_contract"     // unusable declaration (mode string, negative cap)
	RuleIncompleteScan  = "incomplete_scan"  // the scan stopped early, so no product can pass
	RuleUnclaimedChange = "unclaimed_change" // a change outside every product, exclusion and mount stub, with Input.FailUnclaimed
	RuleTooMany         = "too_many_violations"

	RuleMetacopy     = walk.MarkMetacopy
	RuleRedirect     = walk.MarkRedirect
	RuleXwhiteout    = walk.MarkXwhiteout
	RuleBadOpaque    = walk.MarkBadOpaque
	RuleForgedOpaque = walk.MarkForgedOpaque
	RuleForgedXattr  = walk.MarkForgedXattr
)

// maxViolations bounds the violations kept per product and the anomalies
// kept per run; one RuleTooMany entry marks the cut.
const maxViolations = 100

func addViolation(list []Violation, v Violation) []Violation {
	switch {
	case len(list) < maxViolations:
		return append(list, v)
	case len(list) == maxViolations:
		return append(list, Violation{Rule: RuleTooMany, Detail: "further violations not listed"})
	}
	return list
}
