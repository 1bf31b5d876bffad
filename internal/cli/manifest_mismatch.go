package cli

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/spec"
)

// slotProblems groups verify's problems by product slot (or, for a path no
// product accounts for, by that path below staged/), in the order found.
type slotProblems struct {
	order []string
	lines map[string][]string
}

func (s *slotProblems) add(slot, line string) {
	if s.lines == nil {
		s.lines = map[string][]string{}
	}
	if _, ok := s.lines[slot]; !ok {
		s.order = append(s.order, slot)
	}
	s.lines[slot] = append(s.lines[slot], line)
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

// mismatchDetail is one product's problems in an event's detail: how many,
// then as many as fit.
func mismatchDetail(lines []string) string {
	return spec.TruncateDetail(fmt.Sprintf("gensee manifest verify found %d problem(s): %s", len(lines), strings.Join(lines, "; ")))
}

// raiseMismatch records what verify found as boundary evidence: per slot
// with problems, a product_mismatch event, folded by the watchdog (its
// product_mismatch signature fires on it alone), the events appended to the
// operation's events.jsonl and the finding raised on its attention, as the
// shim's watchdog does. A slot whose same problems the attention already
// holds is not raised again. It never changes verify's exit code: what goes
// wrong here is a warning on stderr.
func raiseMismatch(env *Env, op *operation, sp *slotProblems, now time.Time) {
	store, ok := op.stateStore()
	if !ok {
		env.warnf("no attention raised: %s is not an operation directory of the runtime's state dir; "+
			"run gensee manifest verify --operation ID (with --config F naming the runtime's config) to flag it", op.dir)
		return
	}
	cur, _, err := events.ReadAttention(store, op.id)
	if err != nil {
		env.warnf("read attention of operation %s: %v; raising it anew", op.id, err)
	}
	l, err := events.OpenLog(filepath.Join(op.dir, record.EventsFile), 0)
	if err != nil {
		env.warnf("no attention raised on operation %s: %v (run as root)", op.id, err)
		return
	}
	defer l.Close()
	wd := watchdog.New(watchdog.Config{OperationID: op.id})
	raised, already := 0, 0
	for _, slot := range sp.order {
		detail := mismatchDetail(sp.lines[slot])
		if flagged(cur, slot, detail) {
			already++
			continue
		}
		r := wd.ProductMismatch(slot, detail, now, now)
		for _, ev := range r.Events {
			if err := l.Append(ev); err != nil {
				env.warnf("append %s event to %s: %v", ev.Kind, filepath.Join(op.dir, record.EventsFile), err)
			}
		}
		for _, f := range r.Findings {
			if _, err := events.RaiseAttention(store, op.id, f); err != nil {
				env.warnf("raise attention on operation %s: %v", op.id, err)
				continue
			}
			raised++
		}
	}
	switch {
	case raised > 0:
		fmt.Fprintf(env.Stderr, "gensee: attention raised on operation %s: %s %s (gensee attention list shows it)\n",
			op.id, plural(raised, "finding"), watchdog.SignatureProductMismatch)
	case already > 0:
		fmt.Fprintf(env.Stderr, "gensee: operation %s already has attention for these problems (gensee attention list)\n", op.id)
	}
}

// flagged reports whether attention a already holds a product_mismatch
// finding with this slot and detail as its evidence.
func flagged(a spec.Attention, slot, detail string) bool {
	want := events.Sanitize(spec.Event{Target: slot, Detail: detail})
	for _, f := range a.Open() {
		if f.Signature != watchdog.SignatureProductMismatch {
			continue
		}
		for _, ev := range f.Evidence {
			if ev.Kind == spec.EventProductMismatch && ev.Target == want.Target && ev.Detail == want.Detail {
				return true
			}
		}
	}
	return false
}

// stateStore is the state dir op lives in, when op is one of its
// operation directories (attention and events can only be recorded there).
func (op *operation) stateStore() (record.Store, bool) {
	if op.stateDir == "" || !record.ValidOperationID(op.id) {
		return record.Store{}, false
	}
	s := op.store()
	dir, err := s.OperationDir(op.id)
	if err != nil || filepath.Clean(dir) != filepath.Clean(op.dir) {
		return record.Store{}, false
	}
	return s, true
}
