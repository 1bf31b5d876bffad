package cli

import "testing"

// TestBoundaryRunUsage: command-line mistakes of boundary run exit with its
// refusal status (125), never a status its command could have returned
// for itself, and nothing runs.
func TestBoundaryRunUsage(t *testing.T) {
	std().run(t, "boundary", "run", "--workspace", "/w").want(t, ExitRunRefused, nil, []string{"no command", "--"})
	std().run(t, "boundary", "run", "--no-such-flag", "--", "true").want(t, ExitRunRefused, nil, []string{"no-such-flag"})
	std().run(t, "boundary", "run", "--help").want(t, ExitOK, []string{"Exit status:", "125", "124", "123", "-- CMD"}, nil)
}

// TestObserveHostFlags: --workspace, --user and --env belong to a command
// after --; a command excludes the bundle flags.
func TestObserveHostFlags(t *testing.T) {
	std().run(t, "observe", "--workspace", "/w").want(t, ExitUsage, nil, []string{"go with a command after --"})
	std().run(t, "observe", "--bundle", "/b", "--", "true").want(t, ExitUsage, nil, []string{"excludes --bundle"})
}

// TestExitStatusPassesThrough: a command's own status leaves Main as is,
// without a message.
func TestExitStatusPassesThrough(t *testing.T) {
	var w nopWriter
	if got := report(&w, usageCode(&Command{UsageCode: ExitRunRefused}, withPath([]string{"boundary", "run"}, exitStatus(7)))); got != 7 || w.n != 0 {
		t.Fatalf("report = %d (wrote %d bytes), want 7 silently", got, w.n)
	}
}

type nopWriter struct{ n int }

func (w *nopWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
