package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// testNow lies inside the validity window of contrib/boundary/catalog.json.
var testNow = time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)

// harness runs commands in-process with a fixed clock, stdin and host.
type harness struct {
	now   time.Time
	stdin string
	probe Prober
	env   map[string]string
}

type result struct {
	code           int
	stdout, stderr string
}

func std() harness { return harness{now: testNow, probe: fakeProbe(allOK())} }

func (h harness) run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{
		Stdin:  strings.NewReader(h.stdin),
		Stdout: &out,
		Stderr: &errb,
		Getenv: func(k string) string { return h.env[k] },
		Now:    func() time.Time { return h.now },
		Probe:  h.probe,
	}
	code := Main(context.Background(), env, args)
	r := result{code: code, stdout: out.String(), stderr: errb.String()}
	if strings.Contains(r.stderr, "internal error") {
		t.Fatalf("gensee %v panicked: %s", args, r.stderr)
	}
	if code != ExitOK && code != ExitObserved && !strings.HasPrefix(r.stderr, "gensee: ") && !strings.Contains(r.stderr, "\ngensee: ") {
		t.Errorf("gensee %v: exit %d without a \"gensee: \" message on stderr: %q", args, code, r.stderr)
	}
	return r
}

// want checks the exit code and that stdout/stderr contain the substrings.
func (r result) want(t *testing.T, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

// contrib returns the path of a file in contrib/boundary.
func contrib(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "contrib", "boundary", name)
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEnvelope(t *testing.T, p string) *spec.Envelope {
	t.Helper()
	e, err := spec.ParseEnvelope(readFile(t, p))
	if err != nil {
		t.Fatalf("parse envelope %s: %v", p, err)
	}
	return e
}
