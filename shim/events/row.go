package events

import (
	"strings"

	"github.com/gensee/gensee/spec"
)

// RowTime is the layout of a row's time (local time, milliseconds).
const RowTime = "2006-01-02 15:04:05.000"

// Row renders an event as one line a person can read, for `gensee events`:
//
//	2026-11-29 10:00:00.123  egress_denied  network/deny_all  198.51.100.7:80/tcp  detail  (hint: ...)
//
// Fields are sanitized first; empty ones are left out.
func Row(e spec.Event) string {
	e = Sanitize(e)
	parts := []string{e.At.Local().Format(RowTime), e.Kind}
	ctl := e.Control
	if e.Rule != "" {
		ctl += "/" + e.Rule
	}
	parts = append(parts, ctl)
	for _, s := range []string{e.Target, e.Detail} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if e.Hint != "" {
		parts = append(parts, "(hint: "+e.Hint+")")
	}
	return strings.Join(parts, "  ")
}
