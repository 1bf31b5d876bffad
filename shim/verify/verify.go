package verify

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/spec"
)

// Result is what re-hashing one operation's staged products found.
type Result struct {
	*gate.StagedReport
	// Slots are the product slots with problems (for a staged path no
	// product lists, that path below staged/), in the order found.
	Slots []string
	// Lines holds each slot's problems as the evidence records them:
	// "<path>: <what>: expected <value>, actual <value>" with the path
	// relative to the operation directory and a bare digest named as
	// sha256:, or "manifest: <sentence>".
	Lines map[string][]string
}

// OK reports whether every staged product matches its manifest.
func (r *Result) OK() bool { return len(r.Mismatches) == 0 }

// Problems counts the problems found.
func (r *Result) Problems() int { return len(r.Mismatches) }

// ListsStaged reports whether a manifest's products put anything under
// staged/: a passing product must be staged, and a staged path names a
// copy. An operation whose products all failed (or that has none) has
// nothing of its own to re-hash.
func ListsStaged(products []spec.ProductRecord) bool {
	for _, p := range products {
		if p.Verdict == spec.VerdictPass || p.Staged != "" {
			return true
		}
	}
	return false
}

// Staged re-hashes the staged copies below operation directory opDir
// against products (the operation's manifest), as gate.VerifyStaged does,
// and groups the problems by slot. A difference is a problem in the
// result, never an error: the error is for a tree that cannot be read.
func Staged(opDir string, products []spec.ProductRecord) (*Result, error) {
	rep, err := gate.VerifyStaged(opDir, products)
	if err != nil {
		return nil, err
	}
	r := &Result{StagedReport: rep, Lines: map[string][]string{}}
	for _, m := range rep.Mismatches {
		r.add(m.Slot, Line(m))
	}
	return r, nil
}

func (r *Result) add(slot, line string) {
	if _, ok := r.Lines[slot]; !ok {
		r.Slots = append(r.Slots, slot)
	}
	r.Lines[slot] = append(r.Lines[slot], line)
}

// Line is one problem as the evidence records it (see Result.Lines).
func Line(m gate.Mismatch) string {
	if m.Record != "" {
		return "manifest: " + SafeText(m.Record)
	}
	return fmt.Sprintf("%s: %s: expected %s, actual %s", m.Path, m.What, digestText(m.Expected), digestText(m.Actual))
}

// PathLine is one problem for a person to read: as Line, but the path is
// below opDir (absolute when opDir is), digests bare as the manifest
// records them and every recorded string made safe for a terminal.
func PathLine(opDir string, m gate.Mismatch) string {
	if m.Record != "" {
		return "manifest: " + SafeText(m.Record)
	}
	return fmt.Sprintf("%s: %s: expected %s, actual %s",
		SafeText(filepath.Join(opDir, m.Path)), m.What, SafeText(m.Expected), SafeText(m.Actual))
}

// Detail is one slot's problems in an event's detail: how many, then as
// many as fit. It does not say who re-hashed (a person, a timer or
// retention): the same damage must read the same, so that an open finding
// is recognised whoever finds it again.
func Detail(lines []string) string {
	return spec.TruncateDetail(fmt.Sprintf("re-hash of the staged products found %d problem(s): %s", len(lines), strings.Join(lines, "; ")))
}

var bareDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// digestText names a bare sha256 as one, so event redaction (which
// replaces long hex runs) keeps it.
func digestText(s string) string {
	if bareDigest.MatchString(s) {
		return "sha256:" + s
	}
	return s
}

// SafeText is s when it is printable UTF-8, else s quoted: a path or
// target recorded from the container never reaches a terminal raw.
func SafeText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}
