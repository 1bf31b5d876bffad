package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

func TestRefusals(t *testing.T) {
	f := newStateFixture(t, "")
	lines := refusalJSON(testNow.Add(-3*time.Hour), "default", "a", "no_inference") +
		refusalJSON(testNow.Add(-2*time.Hour), "k8s.io", "b", "spec_refused") +
		"{torn\n" +
		`{"at":"2027-01-01T11:00:00Z","namespace":"host","runtime":"host","uid":1000,"user":"ci","reason":"no_inference","field":"--inference","message":"no \u001b[31m inference"}` + "\n"
	writeFile(t, f.state, "refusals.jsonl", lines)

	r := f.run(t, "refusals")
	r.want(t, ExitOK, []string{"TIME", "NAMESPACE", "CONTAINER", "REASON", "MESSAGE", "default", "refused a", "k8s.io", "spec_refused", "ci", "1 malformed line skipped"}, nil)
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("an escape reached the terminal:\n%q", r.stdout)
	}
	if r := f.run(t, "refusals", "--reason", "no_inference"); strings.Contains(r.stdout, "spec_refused") || !strings.Contains(r.stdout, "refused a") {
		t.Errorf("--reason:\n%s", r.stdout)
	}
	if r := f.run(t, "-n", "k8s.io", "refusals"); strings.Contains(r.stdout, "refused a") || !strings.Contains(r.stdout, "refused b") {
		t.Errorf("-n:\n%s", r.stdout)
	}
	if r := f.run(t, "refusals", "--container", "ci"); !strings.Contains(r.stdout, "ci") || strings.Contains(r.stdout, "refused a") {
		t.Errorf("--container of a host run's user:\n%s", r.stdout)
	}
	f.run(t, "refusals", "--container", "nope").want(t, ExitOK, []string{"no refusal matches"}, nil)

	r = f.run(t, "refusals", "--format", "json", "--namespace", "default")
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var v map[string]any
	if len(out) != 1 || json.Unmarshal([]byte(out[0]), &v) != nil || v["container_id"] != "a" {
		t.Fatalf("--format json:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "malformed") {
		t.Errorf("the note is not on stderr with --json: %q", r.stderr)
	}
}

func TestRefusalsNone(t *testing.T) {
	f := newStateFixture(t, "")
	f.run(t, "refusals").want(t, ExitOK, []string{"no refusal recorded"}, nil)
}

// --follow prints what is appended, also across a rewrite by the retention.
func TestRefusalsFollow(t *testing.T) {
	f := newStateFixture(t, "")
	writeFile(t, f.state, "refusals.jsonl", refusalJSON(testNow, "default", "first", "r"))
	var out syncBuffer
	env := &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }, Now: func() time.Time { return testNow }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- Main(ctx, env, []string{"refusals", "--follow", "--config", f.config}) }()
	waitFor(t, &out, "refused first")
	if err := f.st.AppendRefusal(map[string]any{"at": testNow, "namespace": "default", "container_id": "second", "reason": "r", "message": "refused second"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "refused second")
	// The retention drops the oldest line (a new file at the path).
	if _, err := f.st.TrimRefusals(func(io.Reader) (int64, error) {
		return int64(len(refusalJSON(testNow, "default", "first", "r"))), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.AppendRefusal(map[string]any{"at": testNow, "namespace": "default", "container_id": "third", "reason": "r", "message": "refused third"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, "refused third")
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	if s := out.String(); strings.Count(s, "refused second") != 1 || strings.Count(s, "refused first") != 1 {
		t.Fatalf("a line printed twice or lost:\n%s", s)
	}
}

// A row shows the field (unless the message names it) and the fix of
// every front door's line.
func TestRefusalText(t *testing.T) {
	for _, tc := range []struct {
		l    spec.RefusalRecord
		want string
	}{
		{spec.RefusalRecord{Message: "no_inference: the container has no inference"}, "no_inference: the container has no inference"},
		{spec.RefusalRecord{Field: "--workspace", Message: "open /x: no such file", Fix: "pass an existing directory"}, "--workspace: open /x: no such file; pass an existing directory"},
		{spec.RefusalRecord{Field: "linux.namespaces", Message: "linux.namespaces user path \"/p\": gone", Fix: "join a user namespace file"}, "linux.namespaces user path \"/p\": gone; join a user namespace file"},
	} {
		if got := refusalText(tc.l); got != tc.want {
			t.Errorf("refusalText(%+v) = %q, want %q", tc.l, got, tc.want)
		}
	}
}
