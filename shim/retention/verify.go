package retention

import (
	"fmt"
	"time"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"
)

// Why a record decided for removal stayed after all: re-hashed right
// before it would go, its staged products did not match its manifest (the
// product_mismatch finding raised keeps it from then on), or they could
// not be read.
const (
	KeepMismatch   = "product_mismatch"
	KeepUnverified = "unverified"
)

// Mismatched is an operation retention was about to remove whose staged
// products no longer match its manifest. It is kept, and (unless the run
// is dry) the finding is raised on its attention.
type Mismatched struct {
	Op
	Problems int      // problems found
	Slots    []string // products (or stray staged paths) with problems
	Raised   int      // product_mismatch findings raised now
	Already  int      // slots already an open finding
}

// recheck re-hashes the staged products of the operation in dir before it
// is removed, as gensee manifest verify does (shim/verify), so damage no
// person looked for is flagged instead of deleted with the evidence. With
// raise, a mismatch becomes events and a finding (stamped now). It
// returns nil when the operation may go: its products match, or its
// manifest lists nothing staged or cannot be parsed (then there is no
// record to check against, as verify would say). An error means the staged
// tree could not be read: the record stays.
func recheck(st record.Store, dir string, op Op, now time.Time, raise bool, notify func(string, spec.Finding)) (*Mismatched, error) {
	b, _, err := readRecord(dir, record.ManifestFile)
	if err != nil {
		return nil, nil
	}
	m, err := spec.ParseManifest(b)
	if err != nil || !verify.ListsStaged(m.Products) {
		return nil, nil
	}
	res, err := verify.Staged(dir, m.Products)
	if err != nil {
		return nil, fmt.Errorf("re-verify the staged products of operation %s before removing it: %w", op.ID, err)
	}
	if res.OK() {
		return nil, nil
	}
	mm := &Mismatched{Op: op, Problems: res.Problems(), Slots: res.Slots}
	mm.Keep = KeepMismatch
	if !raise {
		return mm, nil
	}
	r := verify.Raise(st, op.ID, res, now)
	mm.Raised, mm.Already = r.Findings, r.Already
	if notify != nil {
		for _, f := range r.New {
			notify(op.ID, f)
		}
	}
	if len(r.Errs) > 0 {
		return mm, fmt.Errorf("operation %s: staged products do not match its manifest; flag it: %w", op.ID, r.Errs[0])
	}
	return mm, nil
}
