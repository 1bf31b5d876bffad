package promote

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"
)

// Request is one promotion the operator asked for.
type Request struct {
	Store       record.Store
	OperationID string
	Slot        string
	Receipt     []byte // the receipt envelope as given
	Dest        string // absolute, clean
	Roots       []string
	// Trust loads the catalog as every front door does (the trust anchor,
	// the catalog it verifies, the high-water mark: engine.LoadTrust), or
	// says why not.
	Trust func(now time.Time) (*spec.Catalog, error)
	EUID  int // the promoter's effective uid
	By    spec.Promoter
	Now   time.Time
}

// Result is what a promotion did.
type Result struct {
	Promotion spec.Promotion
	// Changed: the product was placed now; false when the destination
	// already held it (a re-run).
	Changed bool
	// Recorded: a promotion record was appended now; false when one with
	// the same receipt and destination was there already.
	Recorded bool
	// Raised is what a staged mismatch raised as evidence (as manifest
	// verify raises it), when the staged copies did not match.
	Raised verify.Raised
}

// Promote runs every check in order and, when all pass, places the
// product and records the promotion. A refusal (*Refusal, the first check
// that failed) writes nothing at the destination nor in the promotion
// record; a staged mismatch is raised on the operation's attention as
// manifest verify raises it. Other errors are I/O failures.
func Promote(req Request) (*Result, error) {
	if rf := CheckRoot(req.EUID); rf != nil {
		return nil, rf
	}
	target, rf := CheckDestination(req.Dest, req.Roots)
	if rf != nil {
		return nil, rf
	}
	opDir, err := req.Store.OperationDir(req.OperationID)
	if err != nil {
		return nil, refuse(RuleManifest, "pass the 32 hex characters of an operation id (gensee ls lists them)", "%v", err)
	}
	if _, err := os.Lstat(opDir); err != nil {
		return nil, refuse(RuleManifest, "check the operation id, or pass --config naming the runtime's state_dir",
			"no operation %s in state dir %s", req.OperationID, req.Store.Dir)
	}
	unlock, err := lock(opDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	cat, err := req.Trust(req.Now)
	if err != nil {
		return nil, refuse(RuleTrust, "fix the trust anchor or the catalog as the message says: promotion trusts what admission trusts", "%v", err)
	}
	opened, rf := CheckReceipt(cat, req.Receipt, req.Now)
	if rf != nil {
		return nil, rf
	}
	m, rf := readManifest(opDir, req.OperationID)
	if rf != nil {
		return nil, rf
	}
	pr, rf := CheckBinding(opened.Receipt, req.OperationID, req.Slot, m)
	if rf != nil {
		return nil, rf
	}
	att, _, err := events.ReadAttention(req.Store, req.OperationID)
	if err != nil {
		return nil, refuse(RuleOpenFinding, "look at "+filepath.Join(opDir, events.AttentionFile)+"; gensee attention clear keeps a damaged record aside",
			"the operation's attention record cannot be read, so it may hold an open finding: %v", err)
	}
	if rf := CheckFindings(req.OperationID, att); rf != nil {
		return nil, rf
	}
	res := &Result{}
	staged, err := verify.Staged(opDir, m.Products)
	if err != nil {
		return nil, fmt.Errorf("re-hash the staged products of operation %s: %w", req.OperationID, err)
	}
	if rf := CheckStaged(req.OperationID, staged); rf != nil {
		res.Raised = verify.Raise(req.Store, req.OperationID, staged, req.Now)
		return res, rf
	}
	if rf := CheckExecutables(pr, opened.Receipt, cat); rf != nil {
		return nil, rf
	}

	return res, promoteChecked(req, opDir, target, pr, opened, res)
}

// promoteChecked places the product once every check passed and records
// the promotion, once: a re-run to a destination that holds the product
// records it only if no record names it yet.
func promoteChecked(req Request, opDir string, target Target, pr *spec.ProductRecord, opened *spec.OpenedReceipt, res *Result) error {
	p := spec.Promotion{
		Schema: spec.SchemaPromotion, OperationID: req.OperationID, Slot: pr.Slot, Class: pr.Class,
		ProductDigest: pr.Digest(), Destination: target.Dest(), At: req.Now.UTC(), By: req.By,
		ReceiptDigest: opened.Digest, Verifier: opened.Verifier.ID, VerifierVersion: opened.Receipt.VerifierVersion,
		ConsumerContract: opened.Receipt.ConsumerContract,
	}
	var err error
	if p.Receipt, err = spec.ParseEnvelope(req.Receipt); err != nil {
		return refuse(RuleReceiptFormat, "", "%v", err) // opened above: not reached
	}
	done, err := place(opDir, pr, target, opened.Receipt.ConsumerContract != "")
	if err != nil {
		return err
	}
	res.Promotion, res.Changed = p, done.changed
	records, err := readRecords(opDir)
	if err != nil && !done.changed {
		return fmt.Errorf("%s already holds the product, but the promotion records cannot be read to tell whether this promotion is recorded: %w", p.Destination, err)
	}
	if done.changed || !recorded(records, p) {
		if err := appendRecord(opDir, p); err != nil {
			return fmt.Errorf("promoted to %s, but the promotion record was not written: %w", p.Destination, err)
		}
		res.Recorded = true
	}
	return nil
}

// readManifest reads and strictly parses the operation's manifest.
func readManifest(opDir, opID string) (*spec.Manifest, *Refusal) {
	dfd, err := fsafe.OpenDirAt(unix.AT_FDCWD, opDir)
	if err != nil {
		return nil, refuse(RuleManifest, "check the state dir is readable", "open %s: %v", opDir, err)
	}
	defer unix.Close(dfd)
	raw, err := fsafe.ReadFileAt(dfd, record.ManifestFile, spec.MaxManifestBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, refuse(RuleManifest, "wait until the task exited and its manifest is written; a product is promoted only from a finished operation",
			"operation %s has no manifest yet", opID)
	case err != nil:
		return nil, refuse(RuleManifest, "keep the operation directory for investigation", "read the manifest of operation %s: %v", opID, err)
	}
	m, err := spec.ParseManifest(raw)
	if err != nil {
		return nil, refuse(RuleManifest, "the record was damaged or written by an incompatible runtime; do not promote from it",
			"the manifest of operation %s is invalid: %v", opID, err)
	}
	return m, nil
}
