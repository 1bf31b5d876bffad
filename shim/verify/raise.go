package verify

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/watchdog"
	"github.com/gensee/gensee/spec"
)

// Raised is what Raise recorded.
type Raised struct {
	Findings int            // product_mismatch findings raised now
	New      []spec.Finding // those findings, for the operator's notify command
	Already  int            // slots whose same problems were already an open finding
	Errs     []error        // what could not be read or recorded; the rest still was
}

// Raise records r's problems on operation opID of st as boundary evidence,
// as the shim's watchdog does: per slot with problems, a product_mismatch
// event (and the control_defeat the watchdog folds it into) appended to
// the operation's events.jsonl and the finding raised on its attention. A
// slot whose same problems an open finding already holds is skipped, so a
// timer re-running verify on the same damage adds nothing. now stamps the
// events.
func Raise(st record.Store, opID string, r *Result, now time.Time) Raised {
	var out Raised
	if r == nil || r.OK() {
		return out
	}
	dir, err := st.OperationDir(opID)
	if err != nil {
		out.Errs = append(out.Errs, err)
		return out
	}
	cur, _, err := events.ReadAttention(st, opID)
	if err != nil {
		out.Errs = append(out.Errs, fmt.Errorf("read attention of operation %s: %w; raising it anew", opID, err))
	}
	path := filepath.Join(dir, record.EventsFile)
	l, err := events.OpenLog(path, 0)
	if err != nil {
		out.Errs = append(out.Errs, fmt.Errorf("no attention raised on operation %s: %w", opID, err))
		return out
	}
	defer l.Close()
	wd := watchdog.New(watchdog.Config{OperationID: opID})
	for _, slot := range r.Slots {
		detail := Detail(r.Lines[slot])
		if Flagged(cur, slot, detail) {
			out.Already++
			continue
		}
		res := wd.ProductMismatch(slot, detail, now, now)
		for _, ev := range res.Events {
			if err := l.Append(ev); err != nil {
				out.Errs = append(out.Errs, fmt.Errorf("append %s event to %s: %w", ev.Kind, path, err))
			}
		}
		for _, f := range res.Findings {
			if _, err := events.RaiseAttention(st, opID, f); err != nil {
				out.Errs = append(out.Errs, fmt.Errorf("raise attention on operation %s: %w", opID, err))
				continue
			}
			out.Findings++
			out.New = append(out.New, f)
		}
	}
	return out
}

// Flagged reports whether attention a holds an open product_mismatch
// finding with this slot and detail as its evidence. A finding a person
// cleared does not count: the same damage found again is raised again.
func Flagged(a spec.Attention, slot, detail string) bool {
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
