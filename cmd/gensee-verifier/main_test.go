package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/verifier"
)

// TestMain: started as gensee-verifier, the test binary is the judge.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "gensee-verifier" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// judge runs the judge on stdin: its exit status, stdout and stderr.
func judge(t *testing.T, stdin []byte, args ...string) (int, []byte, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	c := &exec.Cmd{Path: exe, Args: append([]string{"gensee-verifier"}, args...), Env: []string{},
		Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb}
	err = c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return c.ProcessState.ExitCode(), out.Bytes(), errb.String()
}

func request(t *testing.T, schema, doc string) []byte {
	t.Helper()
	req, err := verifier.JudgeRequest([]byte(schema), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

const testSchema = `{"type":"object","required":["ok"],"properties":{"ok":{"const":true},"n":{"type":"integer"}}}`

// TestAnswers: a pass, a fail with its problems, and a schema that does
// not compile or refers to a URL or a file (a schema_error, exit 0 all).
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		name, schema, doc string
		problems          []string // nil: a schema_error
		schemaErr         string
	}{
		{"pass", testSchema, `{"ok": true, "n": 3}`, []string{}, ""},
		{"fail", testSchema, `{"ok": false, "n": "x"}`, []string{"/n: got string, want integer", "/ok: value must be true"}, ""},
		{"not strict JSON", testSchema, `{"ok": true, "ok": true}`, []string{`not strict JSON: object repeats key "ok"`}, ""},
		{"bad schema", `{"type": 5}`, `{}`, nil, "compile JSON Schema: "},
		{"not JSON", `{`, `{}`, nil, "parse JSON Schema: "},
		{"URL", `{"$ref": "https://example.com/s.json"}`, `{}`, nil, "https://example.com/s.json: schemas are read from --schema only; refer to nothing outside it"},
		{"file", `{"$ref": "file:///etc/passwd"}`, `{}`, nil, "file:///etc/passwd: schemas are read from --schema only"},
	} {
		code, out, stderr := judge(t, request(t, c.schema, c.doc))
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit %d: %s", c.name, code, stderr)
			continue
		}
		problems, err := verifier.ParseJudgeAnswer(out)
		var se *verifier.SchemaError
		switch {
		case c.problems == nil && (!errors.As(err, &se) || !strings.Contains(se.Msg, c.schemaErr)):
			t.Errorf("%s: %s: %v, want a schema_error with %q", c.name, out, err, c.schemaErr)
		case c.problems != nil && (err != nil || len(problems) != len(c.problems)):
			t.Errorf("%s: %s: %q, %v, want %q", c.name, out, problems, err, c.problems)
		case c.problems != nil:
			for i := range problems {
				if !strings.Contains(problems[i], c.problems[i]) {
					t.Errorf("%s: problem %q, want %q", c.name, problems[i], c.problems[i])
				}
			}
		}
	}
}

// TestRefused: a request that is not exactly one, or larger than the
// judge reads, is refused whole: nothing on stdout, a message on stderr,
// a non-zero exit.
func TestRefused(t *testing.T) {
	good := request(t, testSchema, "{}")
	big := verifier.MaxJudgeDocumentBytes + 1
	for name, c := range map[string]struct {
		req  []byte
		want string
	}{
		"empty":            {nil, "read the request's header: unexpected EOF"},
		"truncated":        {good[:len(good)-1], "read the document: unexpected EOF"},
		"trailing":         {append(good, ' '), "the request goes on after its document"},
		"other protocol":   {[]byte("gensee-verifier/2 2 2\n{}{}"), "is not \"gensee-verifier/1 <schema bytes> <document bytes>\""},
		"leading zero":     {[]byte("gensee-verifier/1 02 2\n{}{}"), "not a plain decimal"},
		"sign":             {[]byte("gensee-verifier/1 +2 2\n{}{}"), "not a plain decimal"},
		"double space":     {[]byte("gensee-verifier/1  2 2\n{}{}"), "is not"},
		"long header":      {[]byte("gensee-verifier/1 2 " + strings.Repeat("0", 100)), "longer than"},
		"oversized doc":    {fmt.Appendf(nil, "gensee-verifier/1 2 %d\n{}", big), fmt.Sprintf("the document is %d bytes: larger than the judge reads", big)},
		"oversized schema": {fmt.Appendf(nil, "gensee-verifier/1 %d 2\n", verifier.MaxJudgeSchemaBytes+1), "the JSON Schema is 4194305 bytes: larger than the judge reads"},
	} {
		code, out, stderr := judge(t, c.req)
		if code == 0 || len(out) != 0 || !strings.HasPrefix(stderr, "gensee-verifier: ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a refusal with %q", name, code, out, stderr, c.want)
		}
	}
	if _, err := verifier.JudgeRequest([]byte("{}"), make([]byte, big)); !errors.Is(err, verifier.ErrJudgeBounds) {
		t.Errorf("an oversized request was made: %v", err)
	}
	if code, _, stderr := judge(t, good, "x"); code != 2 || !strings.Contains(stderr, "started by gensee verify json-schema only") {
		t.Errorf("an argument: exit %d: %s", code, stderr)
	}
}

// TestParseAnswer: gensee takes exactly one of problems and schema_error.
func TestParseAnswer(t *testing.T) {
	for _, a := range []string{``, `{}`, `null`, `{"problems":null}`, `{"problems":[],"schema_error":"x"}`, `{"schema_error":""}`,
		`{"problems":[]} {}`, `{"problems":[1]}`, `{"problems":[],"other":1}`, `{"problems":[],"problems":["x"]}`} {
		if p, err := verifier.ParseJudgeAnswer([]byte(a)); err == nil {
			t.Errorf("%s: taken as %q", a, p)
		}
	}
	if p, err := verifier.ParseJudgeAnswer([]byte(`{"problems":["a","b"]}`)); err != nil || len(p) != 2 {
		t.Errorf("problems: %q, %v", p, err)
	}
}

// TestHarden: before it reads its request, the judge has no_new_privs,
// its address space limit, no core file and the highest oom_score_adj,
// and names itself.
func TestHarden(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A name of its own until it names itself (the binary's would
	// already be gensee-verifier, cut to 15 bytes).
	link := filepath.Join(t.TempDir(), "judge-under-test")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	c := &exec.Cmd{Path: link, Args: []string{"gensee-verifier"}, Env: []string{}}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer in.Close()
	proc := fmt.Sprintf("/proc/%d/", c.Process.Pid)
	var status, limits []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		status, _ = os.ReadFile(proc + "status")
		if bytes.Contains(status, []byte("Name:\tgensee-verifier\n")) {
			break
		}
	}
	limits, _ = os.ReadFile(proc + "limits")
	if adj, _ := os.ReadFile(proc + "oom_score_adj"); string(adj) != "1000\n" {
		t.Errorf("oom_score_adj %q, want 1000", adj)
	}
	for _, want := range []string{"Name:\tgensee-verifier\n", "NoNewPrivs:\t1\n"} {
		if !bytes.Contains(status, []byte(want)) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	for _, want := range []string{fmt.Sprintf("Max address space %d %d bytes", maxAddressSpace, maxAddressSpace), "Max core file size 0 0 bytes"} {
		found := false
		for _, l := range strings.Split(string(limits), "\n") {
			found = found || strings.Join(strings.Fields(l), " ") == want
		}
		if !found {
			t.Errorf("limits lack %q:\n%s", want, limits)
		}
	}
}
