package trust

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/gensee/gensee/spec"
)

// DefaultCatalogPath is where the signed catalog lives unless the shim's
// own configuration names another path (never an annotation).
const DefaultCatalogPath = "/etc/gensee/catalog.signed.json"

// ClockSkew is how far in the future a catalog's issued_at may lie.
// expires_at gets no slack: expired means now >= expires_at.
const ClockSkew = 2 * time.Minute

// Loaded is a verified, accepted catalog.
type Loaded struct {
	Catalog *spec.Catalog
	Digest  string // "sha256:<hex>" of the exact signed payload bytes
	Version uint64

	// What Current compares: the file's bytes, the anchor the load
	// verified them with, and the high-water state it recorded.
	fileSHA256 string
	anchor     ed25519.PublicKey
	mark       State
}

// Current reports whether l, which LoadCatalog returned for path a moment
// ago, is what LoadCatalog would accept now: the file holds the same
// bytes, anchor is the key that verified them, now is within the
// catalog's validity window, and the high-water mark in state still
// admits its version and payload (read, never written; a FileState's
// only if its lock is free now, creating nothing). A caller that loaded
// the catalog ahead of its need (the shim's preload) uses the load only
// then, and loads again otherwise; it costs the file's read and hash and
// the state's read, not the decode or the signature.
func (l *Loaded) Current(path string, anchor ed25519.PublicKey, state StateStore, now time.Time) bool {
	if l == nil || l.Catalog == nil || l.fileSHA256 == "" || !l.anchor.Equal(anchor) || checkWindow(path, l.Catalog, now) != nil {
		return false
	}
	data, err := readCatalogFile(path)
	if err != nil || fileDigest(data) != l.fileSHA256 {
		return false
	}
	admits := func(cur State, found bool) error {
		if !found {
			return errors.New("no high-water mark")
		}
		_, write, err := advance(path, cur, found, l.mark)
		if err == nil && write {
			err = errors.New("the high-water mark is below the load's version")
		}
		return err
	}
	if c, ok := state.(stateChecker); ok {
		return c.check(admits) == nil
	}
	return state.Update(func(cur State, found bool) (State, bool, error) { return cur, false, admits(cur, found) }) == nil
}

// stateChecker is what Current uses of a StateStore that can read its
// mark without waiting for its lock or creating anything (FileState).
type stateChecker interface {
	check(fn func(cur State, found bool) error) error
}

// LoadCatalog reads the signed catalog at path and accepts it only if, in
// this order: the file is a regular file of at most spec.MaxEnvelopeBytes
// (never through a symlink); the envelope parses strictly; its payloadType
// is spec.PayloadTypeCatalog; the anchor signed it (threshold 1); the
// payload parses strictly and validates; now < expires_at and issued_at <=
// now + ClockSkew; and its version is not below the high-water mark in
// state (equal version: same payload sha256, else equivocation). A higher
// version is recorded in state before LoadCatalog returns. Every refusal is
// a *CatalogError naming the file and the rule. A file whose exact bytes
// this build accepted before (FileState's mark, acceptedCache) skips the
// strict decode and the validation they passed; its signature, window and
// version are checked as ever.
func LoadCatalog(path string, anchor ed25519.PublicKey, state StateStore, now time.Time) (*Loaded, error) {
	data, err := readCatalogFile(path)
	if err != nil {
		return nil, err
	}
	digest := fileDigest(data)
	l, err := loadCatalog(path, data, digest, anchor, state, now)
	if err == nil {
		l.fileSHA256, l.anchor = digest, anchor
	}
	return l, err
}

// loadCatalog is LoadCatalog after the file's read: data, whose sha256 is
// digest.
func loadCatalog(path string, data []byte, digest string, anchor ed25519.PublicKey, state StateStore, now time.Time) (*Loaded, error) {
	cache, _ := state.(acceptedCache)
	if cache != nil {
		if sp, ok := cache.accepted(digest); ok {
			if cat, payload, ok := decodeKnown(data, sp, anchor); ok {
				return admitCatalog(path, cat, payload, state, now)
			}
		}
	}
	l, payload, err := acceptCatalog(path, data, anchor, state, now)
	if err == nil && cache != nil {
		var sp spans
		if start, end, ok := spec.PayloadSpan(data); ok {
			sp.payload = [2]int{start, end}
		}
		if start, end, ok := spec.ContractsSpan(payload); ok {
			sp.contracts = [2]int{start, end}
		}
		cache.markAccepted(digest, sp)
	}
	return l, err
}

// acceptCatalog applies every rule after the file read to the envelope
// bytes data (path only names it in errors); it returns the payload too.
func acceptCatalog(path string, data []byte, anchor ed25519.PublicKey, state StateStore, now time.Time) (*Loaded, []byte, error) {
	env, err := spec.ParseEnvelope(data)
	if err != nil {
		return nil, nil, catErr(path, RuleFormat, "is not a strict DSSE envelope", "re-sign it with `gensee catalog sign`", err)
	}
	if env.PayloadType != spec.PayloadTypeCatalog {
		return nil, nil, catErr(path, RulePayloadType, fmt.Sprintf("payloadType is %q, want %q", env.PayloadType, spec.PayloadTypeCatalog),
			"sign the catalog payload with `gensee catalog sign`, not another document", spec.ErrPayloadType)
	}
	if len(anchor) != ed25519.PublicKeySize {
		return nil, nil, catErr(path, RuleSignature, fmt.Sprintf("trust anchor key has %d bytes, want %d", len(anchor), ed25519.PublicKeySize),
			"load the anchor with trust.LoadAnchor", spec.ErrKey)
	}
	payload, err := env.Verify(spec.PayloadTypeCatalog, []ed25519.PublicKey{anchor}, 1)
	if err != nil {
		return nil, nil, catErr(path, RuleSignature, "is not signed by the trust anchor (keyid "+spec.KeyID(anchor)+")",
			"sign it with the catalog root private key that matches the installed anchor", err)
	}
	cat, err := spec.ParseCatalog(payload)
	if err != nil {
		return nil, nil, catErr(path, RuleFormat, "signed payload is not a valid catalog", "fix the listed fields and re-sign", err)
	}
	l, err := admitCatalog(path, cat, payload, state, now)
	return l, payload, err
}

// admitCatalog applies the rules after the payload's decode and
// validation: the validity window and the high-water mark.
func admitCatalog(path string, cat *spec.Catalog, payload []byte, state StateStore, now time.Time) (*Loaded, error) {
	if err := checkWindow(path, cat, now); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	next := State{Version: cat.Version, PayloadSHA256: hex.EncodeToString(sum[:]), ExpiresAt: cat.ExpiresAt}
	if err := state.Update(func(cur State, found bool) (State, bool, error) {
		return advance(path, cur, found, next)
	}); err != nil {
		var ce *CatalogError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, catErr(path, RuleState, "the high-water mark could not be checked or recorded", "every catalog is refused until the state file is fixed", err)
	}
	return &Loaded{Catalog: cat, Digest: "sha256:" + next.PayloadSHA256, Version: cat.Version, mark: next}, nil
}

func checkWindow(path string, cat *spec.Catalog, now time.Time) error {
	if !now.Before(cat.ExpiresAt) {
		return catErr(path, RuleExpired, fmt.Sprintf("version %d expired at %s (now %s)", cat.Version, cat.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)),
			"publish a newer catalog version with a later expires_at", nil)
	}
	if cat.IssuedAt.After(now.Add(ClockSkew)) {
		return catErr(path, RuleNotYetValid, fmt.Sprintf("version %d is issued at %s, more than %s after now (%s)", cat.Version, cat.IssuedAt.UTC().Format(time.RFC3339), ClockSkew, now.UTC().Format(time.RFC3339)),
			"check this host's clock (NTP) or the signer's issued_at", nil)
	}
	return nil
}

// advance is the high-water rule: lower versions are rollbacks, an equal
// version must carry the identical payload, a higher one moves the mark.
func advance(path string, cur State, found bool, next State) (State, bool, error) {
	switch {
	case !found || next.Version > cur.Version:
		return next, true, nil
	case next.Version < cur.Version:
		return cur, false, catErr(path, RuleRollback, fmt.Sprintf("version %d is lower than version %d already accepted on this host", next.Version, cur.Version),
			fmt.Sprintf("install a catalog with version >= %d", cur.Version), nil)
	case next.PayloadSHA256 != cur.PayloadSHA256:
		return cur, false, catErr(path, RuleEquivocation, fmt.Sprintf("version %d has payload sha256 %s, but version %d was accepted with sha256 %s", next.Version, next.PayloadSHA256, cur.Version, cur.PayloadSHA256),
			"publish changes under a new, higher version; never re-sign a different catalog under a used version", nil)
	}
	return cur, false, nil
}

func catErr(path string, rule Rule, problem, fix string, err error) *CatalogError {
	return &CatalogError{Path: path, Rule: rule, Problem: problem, Fix: fix, Err: err}
}
