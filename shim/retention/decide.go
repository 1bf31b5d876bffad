package retention

import (
	"cmp"
	"slices"
	"time"

	"github.com/gensee/gensee/shim/config"
)

// Policy is the operator's [retention]; a zero field lifts its limit.
type Policy struct {
	MaxAge   time.Duration
	MaxCount int64
	MaxBytes int64
}

// FromConfig is the policy of an operator config.
func FromConfig(r config.Retention) Policy {
	return Policy{MaxAge: r.MaxAge.Duration, MaxCount: r.MaxCount, MaxBytes: int64(r.MaxBytes)}
}

// Unlimited reports whether the policy removes nothing.
func (p Policy) Unlimited() bool { return p.MaxAge <= 0 && p.MaxCount <= 0 && p.MaxBytes <= 0 }

// Why a record goes.
const (
	ReasonAge   = "max_age"
	ReasonCount = "max_count"
	ReasonBytes = "max_bytes"
)

// Removal is one operation record to remove and the limit that removes it.
type Removal struct {
	Op
	Reason string
}

// Decision is what a policy does to a set of records.
type Decision struct {
	Remove []Removal // oldest first
	Kept   []Op      // records that must stay (Keep set), whatever the limits say
	Count  int       // records before
	Bytes  int64     // their bytes before
}

// Decide applies p to ops at time now. Every limit counts every record,
// but only a record that may go (Keep == "") is removed, the oldest
// finished first: first those older than MaxAge, then as many as bring
// the count to MaxCount, then as many as bring the bytes to MaxBytes. When
// the records that must stay alone exceed a limit, it stays exceeded.
func Decide(ops []Op, p Policy, now time.Time) Decision {
	d := Decision{Count: len(ops)}
	var free []Op
	for _, op := range ops {
		d.Bytes += op.Bytes
		if op.Keep != "" {
			d.Kept = append(d.Kept, op)
			continue
		}
		free = append(free, op)
	}
	slices.SortFunc(free, func(a, b Op) int {
		return cmp.Or(a.Finished.Compare(b.Finished), cmp.Compare(a.ID, b.ID))
	})
	count, bytes := int64(len(ops)), d.Bytes
	for _, op := range free {
		reason := ""
		switch {
		case p.MaxAge > 0 && now.Sub(op.Finished) > p.MaxAge:
			reason = ReasonAge
		case p.MaxCount > 0 && count > p.MaxCount:
			reason = ReasonCount
		case p.MaxBytes > 0 && bytes > p.MaxBytes:
			reason = ReasonBytes
		default:
			continue
		}
		d.Remove = append(d.Remove, Removal{Op: op, Reason: reason})
		count--
		bytes -= op.Bytes
	}
	return d
}
