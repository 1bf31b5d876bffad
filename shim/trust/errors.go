package trust

import (
	"errors"
	"fmt"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// Sentinels: every *AnchorError matches ErrUntrustedAnchor and every
// *CatalogError matches ErrCatalogRefused under errors.Is.
var (
	ErrUntrustedAnchor = errors.New("untrusted trust anchor")
	ErrCatalogRefused  = errors.New("catalog refused")
)

// Rule names the check that refused a trust input. The strings are stable
// (logs, events and tests match on them).
type Rule string

// Anchor rules.
const (
	RuleAbsolutePath Rule = "absolute_path" // the configured path is relative
	RuleParentDir    Rule = "parent_dir"    // a parent is missing, not a directory, or a symlink
	RuleParentOwner  Rule = "parent_owner"  // a parent directory is not owned by root
	RuleParentMode   Rule = "parent_mode"   // a parent directory is group/other-writable
	RuleMissing      Rule = "missing"       // the file does not exist
	RuleSymlink      Rule = "symlink"       // the file is a symlink
	RuleRegular      Rule = "regular_file"  // the file is a directory, fifo, device...
	RuleOwner        Rule = "owner"         // the file is not owned by root
	RuleMode         Rule = "mode"          // the file has group/other permission bits
	RuleLinks        Rule = "single_link"   // the file has more than one hard link
	RuleSize         Rule = "size"          // the file is larger than its cap
	RuleFormat       Rule = "format"        // the contents are not a key / envelope / catalog
	RuleIO           Rule = "io"            // the file could not be read
)

// Catalog rules.
const (
	RulePayloadType  Rule = "payload_type"  // envelope payloadType is not the catalog's
	RuleSignature    Rule = "signature"     // not signed by the trust anchor
	RuleExpired      Rule = "expired"       // now >= expires_at
	RuleNotYetValid  Rule = "not_yet_valid" // issued_at > now + ClockSkew
	RuleRollback     Rule = "rollback"      // version lower than the high-water mark
	RuleEquivocation Rule = "equivocation"  // same version, different payload
	RuleState        Rule = "state"         // the high-water state could not be read or written
)

// AnchorError refuses a trust anchor file. Its message is a fix-it
// sentence: "trust anchor <path>: <problem>; <fix>".
type AnchorError struct {
	Path    string
	Rule    Rule
	Problem string
	Fix     string
	Err     error // underlying cause, if any
}

func (e *AnchorError) Error() string {
	return fmt.Sprintf("trust anchor %s: %s%s; %s", e.Path, e.Problem, cause(e.Err), e.Fix)
}

func (e *AnchorError) Unwrap() []error { return nonNil(ErrUntrustedAnchor, e.Err) }

// CatalogError refuses a signed catalog: "catalog <path>: <problem>; <fix>".
type CatalogError struct {
	Path    string
	Rule    Rule
	Problem string
	Fix     string
	Err     error
}

func (e *CatalogError) Error() string {
	return fmt.Sprintf("catalog %s: %s%s; %s", e.Path, e.Problem, cause(e.Err), e.Fix)
}

// cause renders a wrapped error that adds detail (JSON paths, state file
// problems). A bare errno or sentinel adds nothing the problem doesn't say.
func cause(err error) string {
	if _, bare := err.(unix.Errno); err == nil || bare || err == spec.ErrPayloadType || err == spec.ErrTooLarge || err == spec.ErrKey {
		return ""
	}
	return ": " + err.Error()
}

func (e *CatalogError) Unwrap() []error { return nonNil(ErrCatalogRefused, e.Err) }

func nonNil(errs ...error) []error {
	out := errs[:0:0]
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}
