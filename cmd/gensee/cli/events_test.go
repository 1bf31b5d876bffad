package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

var evAt = time.Date(2027, 1, 1, 12, 1, 0, 0, time.UTC)

func denial(i int, target string) spec.Event {
	return spec.Event{Kind: spec.EventEgressDenied, Control: "network", Rule: "deny_all", Target: target,
		Detail: "connect refused by the operation's table", At: evAt.Add(time.Duration(i) * time.Second), OperationID: fxOperation}
}

func hintLoop(i int) spec.Event {
	return spec.Event{Kind: spec.EventHintLoop, Control: "watchdog", Rule: "denial_loop", Target: "198.51.100.7:80/tcp",
		Detail: "2 consecutive egress denials with no allowed flow in between: 198.51.100.7:80/tcp",
		Hint:   "retrying will not help: the contract allows no network at all", At: evAt.Add(time.Duration(i) * time.Second), OperationID: fxOperation}
}

func defeatEvent(at time.Time) spec.Event {
	return spec.Event{Kind: spec.EventControlDefeat, Control: "watchdog", Rule: "deny_then_reach", Target: "198.51.100.7:80/tcp",
		Detail: "198.51.100.7:80/tcp was denied 2 time(s) and was later reached", At: at, OperationID: fxOperation}
}

func defeatFinding(at time.Time) spec.Finding {
	return spec.Finding{Signature: "deny_then_reach", Detail: "198.51.100.7:80/tcp was denied 2 time(s) and was later reached",
		Evidence: []spec.Event{denial(0, "198.51.100.7:80/tcp"), {Kind: spec.EventFlowReached, Control: "watchdog",
			Target: "198.51.100.7:80/tcp", At: at, OperationID: fxOperation}}, At: at}
}

// appendEvents appends evs to the log at path as the runtime does.
func appendEvents(t *testing.T, path string, evs ...spec.Event) {
	t.Helper()
	l, err := events.OpenLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, e := range evs {
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
}

// appendRaw appends bytes the runtime would not write (a torn line).
func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// writeEventsFixture gives the fixture's operation a log with two walls, a
// hint loop, a hostile detail, one malformed line and 3 dropped events.
func writeEventsFixture(t *testing.T, fx *opFixture) string {
	t.Helper()
	path := filepath.Join(fx.dir, record.EventsFile)
	appendEvents(t, path, denial(0, "198.51.100.7:80/tcp"), denial(1, "198.51.100.7:80/tcp"), hintLoop(1))
	// Written by hand, unsanitized: the CLI must not trust the log's writer.
	appendRaw(t, path, `{"kind":"egress_denied","control":"network","rule":"deny_all","target":"203.0.113.9:443/tcp",`+
		`"detail":"sent Bearer abc.def.ghi \u001b[31m\nthen gave up","at":"2027-01-01T12:01:02Z"}`+"\n")
	appendRaw(t, path, "{\"kind\": \"egress_denied\", torn\n")
	writeFile(t, fx.dir, record.EventsFile+events.DroppedSuffix, `{"dropped":3,"limit_bytes":1048576,"last_at":"2027-01-01T12:05:00Z"}`+"\n")
	return path
}

func TestEventsRows(t *testing.T) {
	fx := newOpFixture(t)
	writeEventsFixture(t, fx)
	r := fx.run(t, "events", "--operation", fxOperation)
	r.want(t, ExitOK, []string{
		"egress_denied  network/deny_all  198.51.100.7:80/tcp  connect refused",
		"hint_loop  watchdog/denial_loop  198.51.100.7:80/tcp",
		"\n    guidance (changes no decision): retrying will not help",
		"Bearer [REDACTED]",
		"3 events dropped: the log reached its size bound",
		"1 malformed line skipped",
	}, nil)
	if strings.Contains(r.stdout, "\x1b") || strings.Contains(r.stdout, "abc.def") {
		t.Errorf("hostile detail reached the terminal:\n%q", r.stdout)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "hint_loop") && strings.Contains(line, "retrying") {
			t.Errorf("hint printed on its event's row, not separately: %q", line)
		}
	}
	if n := strings.Count(r.stdout, "egress_denied"); n != 3 {
		t.Errorf("%d egress_denied rows, want 3:\n%s", n, r.stdout)
	}
}

func TestEventsJSON(t *testing.T) {
	fx := newOpFixture(t)
	writeEventsFixture(t, fx)
	r := fx.run(t, "events", "--container", fxContainer, "--namespace", fxNamespace, "--json")
	r.want(t, ExitOK, nil, []string{"3 events dropped", "1 malformed line skipped"})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d JSON lines, want 4:\n%s", len(lines), r.stdout)
	}
	for i, l := range lines {
		e, err := spec.ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("line %d is not an event: %v\n%s", i, err, l)
		}
		if i == 2 && (e.Kind != spec.EventHintLoop || e.Hint == "") {
			t.Errorf("line 2 = %+v, want the hint_loop with its hint", e)
		}
	}
	if strings.Contains(r.stdout, "dropped") {
		t.Errorf("notes mixed into JSON stdout:\n%s", r.stdout)
	}
}

func TestEventsEmptyAndUsage(t *testing.T) {
	fx := newOpFixture(t)
	fx.run(t, "events", "--operation", fxOperation).want(t, ExitOK, []string{"no events recorded for operation " + fxOperation}, nil)
	fx.run(t, "events", "--operation", strings.Repeat("f", 32)).want(t, ExitUsage, nil, []string{"no directory"})
	fx.run(t, "events", "--address", "/nonexistent.sock").want(t, ExitUsage, nil, []string{"add --follow"})
	fx.run(t, "events", "--follow", "--address", "/x.sock", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"every container"})
	if err := os.Symlink("/etc/passwd", filepath.Join(fx.dir, record.EventsFile)); err != nil {
		t.Fatal(err)
	}
	fx.run(t, "events", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"not a regular file"})
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, b *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output never contained %q:\n%s", s, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFollowEvents: following prints what is there, picks up an appended
// event at the next poll, and returns nil when its context ends (what
// SIGINT does). The polls' ticker is on the bubble's clock; the log is a
// regular file, whose reads return at once.
func TestFollowEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), record.EventsFile)
		appendEvents(t, path, denial(0, "198.51.100.7:80/tcp"))
		var out, notes syncBuffer
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		const interval = 10 * time.Millisecond
		go func() { done <- followEvents(ctx, path, interval, eventPrinter{w: &out}, &notes) }()
		synctest.Wait()
		if !strings.Contains(out.String(), "198.51.100.7:80/tcp") {
			t.Fatalf("the log's event not printed at once:\n%s", out.String())
		}
		appendEvents(t, path, hintLoop(1))
		time.Sleep(interval)
		synctest.Wait()
		if !strings.Contains(out.String(), "guidance (changes no decision): retrying") {
			t.Fatalf("the appended event not printed at the next poll:\n%s", out.String())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("followEvents = %v, want nil on cancel", err)
		}
		if n := strings.Count(out.String(), "egress_denied"); n != 1 {
			t.Errorf("first event printed %d times:\n%s", n, out.String())
		}
	})
}

func liveJSON(t *testing.T, l events.LiveLine) []byte {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatchLines: what gensee-events hands over is printed; a line that is
// not a gensee event is skipped with a warning; cancel stops the
// subscriber and is exit 0. In a bubble, synctest.Wait says when every
// line was handled.
func TestWatchLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, asJSON := range []bool{false, true} {
			var out, errb bytes.Buffer
			env := &Env{Stdout: &out, Stderr: &errb}
			ev := hintLoop(1)
			f := defeatFinding(evAt)
			att := events.LiveAttention{OperationID: fxOperation, Signature: f.Signature, Detail: f.Detail, At: evAt,
				Evidence: "egress_denied 198.51.100.7:80/tcp; flow_reached 198.51.100.7:80/tcp"}
			lines := make(chan []byte, 4)
			lines <- liveJSON(t, events.LiveLine{Topic: events.TopicBoundary, Namespace: "k8s.io", Event: &ev})
			lines <- liveJSON(t, events.LiveLine{Topic: events.TopicAttention, Namespace: "k8s.io", Attention: &att})
			lines <- liveJSON(t, events.LiveLine{Topic: events.TopicBoundary, Namespace: "k8s.io"})
			lines <- []byte("not json")
			ctx, cancel := context.WithCancel(t.Context())
			stopped := false
			done := make(chan error, 1)
			go func() {
				done <- watchLines(ctx, env, asJSON, lines, func() { stopped = true; close(lines) }, func() error { return nil })
			}()
			synctest.Wait() // every line taken and printed: watchLines waits on its channels
			cancel()
			if err := <-done; err != nil || !stopped {
				t.Fatalf("watchLines = %v (subscriber stopped: %v), want nil and stopped on cancel", err, stopped)
			}
			if n := strings.Count(errb.String(), "warning: skip a line of gensee-events"); n != 2 {
				t.Errorf("%d warnings for the two foreign lines: %q", n, errb.String())
			}
			if !asJSON {
				for _, s := range []string{"k8s.io  " + fxOperation + "  ", "hint_loop  watchdog/denial_loop", "guidance (changes no decision)",
					"ATTENTION control_defeat  deny_then_reach", "evidence: egress_denied 198.51.100.7:80/tcp; flow_reached 198.51.100.7:80/tcp"} {
					if !strings.Contains(out.String(), s) {
						t.Errorf("rows lack %q:\n%s", s, out.String())
					}
				}
				continue
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(got) != 2 {
				t.Fatalf("%d JSON lines, want 2:\n%s", len(got), out.String())
			}
			var e0, e1 events.LiveLine
			if json.Unmarshal([]byte(got[0]), &e0) != nil || e0.Event == nil || e0.Event.Kind != spec.EventHintLoop || e0.Namespace != "k8s.io" {
				t.Errorf("line 0 = %s", got[0])
			}
			if json.Unmarshal([]byte(got[1]), &e1) != nil || e1.Attention == nil || e1.Attention.Signature != "deny_then_reach" || e1.Topic != events.TopicAttention {
				t.Errorf("line 1 = %s", got[1])
			}
		}
	})
}

// TestWatchLinesEnded: a subscription that ends says why.
func TestWatchLinesEnded(t *testing.T) {
	lines := make(chan []byte)
	close(lines)
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	err := watchLines(context.Background(), env, false, lines, func() {}, func() error { return errors.New("connection refused") })
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("watchLines = %v, want why the subscription ended", err)
	}
}

// TestRelayWarnings: the subscriber's warnings pass on (made printable);
// its last other line is why it stopped.
func TestRelayWarnings(t *testing.T) {
	var w bytes.Buffer
	why := relayWarnings(strings.NewReader("gensee: warning: skip an event\nconnect to containerd at /x: refused\x1b\n"), &w)
	if w.String() != "gensee: warning: skip an event\n" || why != strconv.Quote("connect to containerd at /x: refused\x1b") {
		t.Fatalf("relayed %q, why %q", w.String(), why)
	}
}

// TestHandedLines: a line over maxLiveLine (a publisher's oversized field)
// is skipped with a warning and the lines after it still arrive; the last
// line needs no newline.
func TestHandedLines(t *testing.T) {
	var errb bytes.Buffer
	env := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	in := "first\n" + strings.Repeat("<", maxLiveLine+10) + "\nafter\nlast"
	lines := make(chan []byte, 8)
	handedLines(strings.NewReader(in), lines, env)
	var got []string
	for l := range lines {
		got = append(got, string(l))
	}
	if strings.Join(got, ",") != "first,after,last" {
		t.Fatalf("lines %q", got)
	}
	if !strings.Contains(errb.String(), "skip a line of gensee-events: longer than") {
		t.Errorf("no warning for the long line: %q", errb.String())
	}
}

// TestSubscriberEnded: the subscriber's own message, an end without one,
// and a subscriber that stopped unexpectedly (a signal, a panic) are told
// apart.
func TestSubscriberEnded(t *testing.T) {
	exitOf := func(script string) error {
		return exec.Command("/bin/sh", "-c", script).Run()
	}
	var se *subscriberError
	if err := subscriberEnded("subscribe to containerd's events: refused", exitOf("exit 1")); err == nil || errors.As(err, &se) || err.Error() != "subscribe to containerd's events: refused" {
		t.Errorf("its message: %v", err)
	}
	if err := subscriberEnded("", nil); err == nil || err.Error() != "the daemon ended the subscription" {
		t.Errorf("an end: %v", err)
	}
	if err := subscriberEnded("", exitOf("kill -9 $$")); !errors.As(err, &se) {
		t.Errorf("a signal: %v", err)
	}
	if err := subscriberEnded("panic: boom", exitOf("exit 2")); !errors.As(err, &se) || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("a panic: %v", err)
	}
	var w bytes.Buffer
	if why := relayWarnings(strings.NewReader("panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n"), &w); why != "panic: boom" {
		t.Errorf("a panic's why %q", why)
	}
}
