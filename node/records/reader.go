package records

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// Reader follows one state directory. Not safe for concurrent use.
type Reader struct {
	store      record.Store
	cursorPath string
	cur        cursor
	saved      []byte // the cursor as last saved
	// ops caches each operation's labels and attention.json's last seen
	// stamp; rebuilt from the records after a restart.
	ops map[string]*opState
	// Malformed counts lines and records that did not parse (torn or
	// over-long writes), skipped.
	Malformed int
	// More: the last Poll stopped at its budget (pollBytes, pollLines)
	// with records left for the next.
	More bool
	// badAdm is the stamp of each admission.json that did not parse:
	// counted malformed once, read again only once it changes.
	badAdm map[string]stamp
	// admReads counts the reads of admission.json (tests).
	admReads int
}

// Open starts a reader of stateDir at the cursor saved at cursorPath (a
// file of the daemon's own; none yet: from the records' beginning).
func Open(stateDir, cursorPath string) (*Reader, error) {
	c, err := loadCursor(cursorPath)
	if err != nil {
		return nil, err
	}
	return &Reader{store: record.Store{Dir: stateDir}, cursorPath: cursorPath, cur: c, ops: map[string]*opState{}, badAdm: map[string]stamp{}}, nil
}

// Poll returns the records written since the cursor, refusals first, and
// moves the cursor in memory; Commit saves it. An error leaves what was
// read so far in the result and the cursor past it. One Poll reads at
// most pollBytes and pollLines of the logs; More says it stopped there.
func (r *Reader) Poll() ([]Record, error) {
	var out []Record
	b := newBudget()
	defer func() { r.More = b.spent() }()
	n, err := follow(r.store.RefusalsPath(), &r.cur.Refusals, b, func(line []byte) {
		if rf, ok := parseRefusal(line); ok {
			out = append(out, rf)
		} else {
			r.Malformed++
		}
	})
	r.Malformed += n
	if err != nil {
		return out, fmt.Errorf("follow refusals log: %w", err)
	}
	ops, err := r.pollOperations(b)
	return append(out, ops...), err
}

// Commit saves the cursor durably: what Poll returned is not returned
// again, even after a restart.
func (r *Reader) Commit() error { return r.cur.save(r.cursorPath, &r.saved) }

// lineStart is how every refusals line begins (RefusalRecord's first
// field): a torn line glued to the next is recovered from its last one.
var lineStart = []byte(`{"at":`)

// parseRefusal decodes a refusals.jsonl line; a line a crashed writer left
// unterminated and the next append then ended is read from the last
// record start in it.
func parseRefusal(line []byte) (Refusal, bool) {
	var l spec.RefusalRecord
	if json.Unmarshal(line, &l) == nil && l.Reason != "" {
		return Refusal{l}, true
	}
	if i := bytes.LastIndex(line, lineStart); i > 0 {
		if json.Unmarshal(line[i:], &l) == nil && l.Reason != "" {
			return Refusal{l}, true
		}
	}
	return Refusal{}, false
}
