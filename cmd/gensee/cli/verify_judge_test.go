package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/verifier"
	"github.com/gensee/gensee/shim/verifier/schema"
	"github.com/gensee/gensee/spec"
)

// The cli's tests run gensee in-process, where no gensee-verifier lies
// beside the test binary: they judge in-process, through the protocol.
func init() { judgeJSONSchema = inProcessJudge }

func inProcessJudge(_ context.Context, s, doc []byte) ([]string, error) {
	req, err := verifier.JudgeRequest(s, doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := schema.Serve(bytes.NewReader(req), &out); err != nil {
		return nil, err
	}
	return verifier.ParseJudgeAnswer(out.Bytes())
}

// TestMain: run as gensee-verifier (runJudge starts the test binary under
// that name), the test binary is a judge that answers the request
// "probe" with what it was given instead.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == judgeBinary {
		os.Exit(fakeJudge())
	}
	os.Exit(m.Run())
}

func fakeJudge() int {
	req, _ := io.ReadAll(os.Stdin)
	if !bytes.Contains(req, []byte("\nprobe")) {
		fmt.Fprintln(os.Stderr, "no probe")
		return 3
	}
	groups, _ := os.Getgroups()
	// Its fds: stdio's kinds, and any other but the Go runtime's cgroup
	// files.
	var fds []string
	d, _ := os.ReadDir("/proc/self/fd")
	for _, e := range d {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own, closed once read
		}
		if n, _ := strconv.Atoi(e.Name()); n <= 2 {
			l, _, _ = strings.Cut(l, ":")
		} else if strings.HasPrefix(l, "/sys/fs/cgroup/") {
			continue
		}
		fds = append(fds, e.Name()+"="+l)
	}
	wd, _ := os.Getwd()
	facts := []string{
		fmt.Sprintf("uid=%d gid=%d groups=%v", os.Getuid(), os.Getgid(), groups),
		fmt.Sprintf("env=%q wd=%s fds=%v", os.Environ(), wd, fds),
	}
	b, _ := json.Marshal(map[string][]string{"problems": facts})
	os.Stdout.Write(b)
	return 0
}

// TestRunJudge: the judge gets no environment, / as its directory, its
// three pipes only (and the fd it reads /proc/self/fd with), and as root
// a uid and gid of its own in the judges' range without groups; a failing
// judge's message is kept.
func TestRunJudge(t *testing.T) {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	facts, err := runJudge(context.Background(), self, []byte("gensee-verifier/1 5 0\nprobe"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("uid=%d gid=%d groups=[]", os.Getuid(), os.Getgid()), "env=[] wd=/ fds=[0=pipe 1=pipe 2=pipe]"}
	if os.Geteuid() == 0 && len(facts) > 0 {
		var uid, gid uint32
		if _, err := fmt.Sscanf(facts[0], "uid=%d gid=%d groups=[]", &uid, &gid); err != nil || uid != gid ||
			uid < judgeIDBase || uid >= judgeIDBase+judgeIDSpan {
			t.Errorf("the judge ran as %q, want a uid and gid of its own in [%#x, %#x)", facts[0], judgeIDBase, judgeIDBase+judgeIDSpan)
		}
		want[0] = facts[0]
	}
	if strings.Join(facts, "\n") != strings.Join(want, "\n") {
		t.Errorf("the judge was given %q, want %q", facts, want)
	}
	// Two judgements, two uids (a collision is one in 2^24).
	if os.Geteuid() == 0 {
		a, _ := judgeID()
		b, _ := judgeID()
		if a == b {
			t.Errorf("two judges drew the same uid %d", a)
		}
	}
	if _, err := runJudge(context.Background(), self, []byte("x")); err == nil || !strings.Contains(err.Error(), "exit status 3: no probe") {
		t.Errorf("a failing judge: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	// As root, a judge others may not execute says so.
	p := filepath.Join(t.TempDir(), judgeBinary)
	if err := os.WriteFile(p, readFile(t, "/proc/self/exe"), 0o700); err != nil {
		t.Fatal(err)
	}
	own, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := runJudge(context.Background(), own, []byte("x")); err == nil || !strings.Contains(err.Error(), "install it mode 0755") {
		t.Errorf("a judge of mode 0700: %v", err)
	}
}

// TestOpenJudge: with no gensee-verifier beside gensee, or one that is
// not as trusted as gensee, nothing is judged, and the error says how to
// install it.
func TestOpenJudge(t *testing.T) {
	if _, err := execJudge(context.Background(), []byte("{}"), []byte("{}")); !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), "install gensee-verifier beside gensee; make build puts both in bin/") {
		t.Errorf("missing: %v", err)
	}
	p := filepath.Join(t.TempDir(), judgeBinary)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o777)
	var ue *fsafe.UntrustedError
	if _, err := openBeside(judgeBinary)(fsafe.OpenTrusted(p, uint32(os.Getuid()))); !errors.As(err, &ue) || !strings.Contains(err.Error(), "install gensee-verifier again beside gensee") {
		t.Errorf("writable by others: %v", err)
	}
	os.Chmod(p, 0o755)
	f, err := openBeside(judgeBinary)(fsafe.OpenTrusted(p, uint32(os.Getuid())))
	if err != nil {
		t.Fatalf("trusted: %v", err)
	}
	f.Close()
}

// TestVerifySchemaRefused: a schema that does not compile, or refers to
// a URL, is refused as before; a receipt's criteria_digest is the sha256
// of the schema file's bytes.
func TestVerifySchemaRefused(t *testing.T) {
	f := newPromoteFixture(t)
	for name, doc := range map[string]string{"bad.json": `{"type": 5}`, "ref.json": `{"$ref": "https://example.com/s.json"}`, "notjson.json": `{`} {
		s := writeFile(t, f.base, name, doc)
		f.run(t, "verify", "json-schema", "--schema", s, "--key", f.verifierKey, "--operation", fxOperation, "--slot", "out/result.json").want(t, ExitRefused,
			nil, []string{"read JSON Schema " + s + ": ", "; pass a JSON Schema document that refers to nothing outside itself"})
	}
	r := f.run(t, "verify", "json-schema", "--schema", f.schema, "--key", f.verifierKey, "--operation", fxOperation, "--slot", "out/result.json")
	r.want(t, ExitOK, nil, nil)
	var env spec.Envelope
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var rec spec.Receipt
	if err := json.Unmarshal(payload, &rec); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(readFile(t, f.schema))
	if rec.CriteriaDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("criteria_digest %s", rec.CriteriaDigest)
	}
}

// TestJudgeMessage: a judge's stderr becomes one line, without its name
// or a crash's goroutines.
func TestJudgeMessage(t *testing.T) {
	for in, want := range map[string]string{
		"gensee-verifier: read the document: unexpected EOF\n": "read the document: unexpected EOF",
		"runtime: out of memory: cannot allocate 633339904-byte block (2335834112 in use)\nfatal error: out of memory\n\ngoroutine 1 gp=0x1 m=0 [running]:\nruntime.throw()\n": "runtime: out of memory: cannot allocate 633339904-byte block (2335834112 in use); fatal error: out of memory",
		"\x1b[2Jx\n": `"\x1b[2Jx"`,
		"":           "",
	} {
		if got := judgeMessage([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
