package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/verifier"
)

// judgeBinary is the JSON Schema judge (cmd/gensee-verifier), installed
// beside gensee: the CLI never links the JSON Schema library, whose
// initialisation would slow every gensee command.
const judgeBinary = "gensee-verifier"

const (
	// judgeTimeout bounds one judgement: a 64 MiB document takes the
	// judge some 40 s.
	judgeTimeout = 60 * time.Second
	// judgeIDBase and judgeIDSpan: when gensee runs as root, each judge
	// runs as a uid and gid drawn from [judgeIDBase, judgeIDBase+judgeIDSpan)
	// (judgeID), which no account, no user namespace's range and no other
	// process holds: a process of a shared uid (nobody: a host run's
	// command may be one) could stop, trace or rewrite a judge of its uid
	// and forge its verdict.
	judgeIDBase, judgeIDSpan = 0x60000000, 1 << 24
	// maxJudgeStderr bounds the judge's message kept for an error.
	maxJudgeStderr = 4 << 10
)

// judgeJSONSchema judges doc against the JSON Schema schema: the problems
// (none: a pass), a *verifier.SchemaError when schema does not compile,
// or the error that no judgement was made. The cli's tests replace it
// with an in-process judge.
var judgeJSONSchema = execJudge

// execJudge runs gensee-verifier beside gensee (openJudge) with one
// request of the judge protocol (package verifier) and reads its answer.
func execJudge(ctx context.Context, schema, doc []byte) ([]string, error) {
	req, err := verifier.JudgeRequest(schema, doc)
	if err != nil {
		return nil, err
	}
	bin, err := openBeside(judgeBinary)(fsafe.OpenTrustedSibling(judgeBinary))
	if err != nil {
		return nil, err
	}
	defer bin.Close()
	return runJudge(ctx, bin, req)
}

// openBeside takes a program of gensee's (name: the judge, the events
// subscriber) as fsafe.OpenTrustedSibling opened it: a regular
// executable beside gensee, of the owner of gensee's binary, that only
// that owner may write, in directories nobody else may write. It is
// opened once and run from that fd, so that what was checked is what
// runs. A missing or untrusted one is an error that says how to install
// it; gensee has none of its own.
func openBeside(name string) func(f *os.File, err error) (*os.File, error) {
	return func(f *os.File, err error) (*os.File, error) {
		var ue *fsafe.UntrustedError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: install %s beside gensee; make build puts both in bin/", err, name)
		case errors.As(err, &ue) && filepath.Base(ue.Path) == name:
			return nil, fmt.Errorf("%w: install %s again beside gensee (make build puts both in bin/)", err, name)
		case errors.As(err, &ue):
			return nil, fmt.Errorf("%w, above %s: install gensee in a directory only root may write", err, name)
		case err != nil:
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		return f, nil
	}
}

// judgeID draws the uid (and gid) a judge runs as: random in the judges'
// range, and in no range /etc/subuid or /etc/subgid hands a user
// namespace (their processes are host uids too).
func judgeID() (uint32, error) {
	taken := append(subIDRanges("/etc/subuid"), subIDRanges("/etc/subgid")...)
	for range 16 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		id := judgeIDBase + binary.LittleEndian.Uint32(b[:])%judgeIDSpan
		if !slices.ContainsFunc(taken, func(r [2]uint64) bool { return uint64(id) >= r[0] && uint64(id) < r[0]+r[1] }) {
			return id, nil
		}
	}
	return 0, errors.New("no uid for the judge outside /etc/subuid's and /etc/subgid's ranges")
}

// subIDRanges reads the ranges (first id, count) of a subordinate id
// file; a missing or unreadable one has none.
func subIDRanges(path string) [][2]uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out [][2]uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 {
			continue
		}
		first, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil {
			out = append(out, [2]uint64{first, n})
		}
	}
	return out
}

// runJudge runs the judge bin (opened by openJudge) from its fd with req
// on its stdin and returns its answer. The judge parses untrusted bytes,
// so it gets less than gensee has: no environment, / as its working
// directory, only its three pipes, SIGKILL when gensee dies, judgeTimeout,
// and as root, a uid and gid of its own (judgeID) without supplementary
// groups. Its answer is read up to verifier.MaxJudgeAnswerBytes.
func runJudge(ctx context.Context, bin *os.File, req []byte) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, judgeTimeout)
	defer cancel()
	stdout := &capped{max: verifier.MaxJudgeAnswerBytes}
	stderr := &capped{max: maxJudgeStderr}
	c := exec.CommandContext(ctx, "/proc/self/fd/"+strconv.Itoa(int(bin.Fd())))
	c.Args = []string{judgeBinary}
	c.Env = []string{}
	c.Dir = "/"
	c.Stdin, c.Stdout, c.Stderr = bytes.NewReader(req), stdout, stderr
	c.WaitDelay = time.Second
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var id uint32
	if os.Geteuid() == 0 {
		var err error
		if id, err = judgeID(); err != nil {
			return nil, err
		}
		// Groups empty and NoSetGroups false: setgroups(0), so none of
		// root's supplementary groups stays.
		c.SysProcAttr.Credential = &syscall.Credential{Uid: id, Gid: id, Groups: []uint32{}}
	}
	// Whatever fd gensee inherited without close-on-exec would pass to
	// the judge too (os/exec closes only its own).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, fmt.Errorf("mark inherited fds close-on-exec: %w", err)
	}
	err := c.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("%s gave no answer within %s", judgeBinary, judgeTimeout)
	case errors.Is(err, fs.ErrPermission) && c.SysProcAttr.Credential != nil:
		return nil, fmt.Errorf("%s: %w: it runs as a uid of its own (%d); install it mode 0755", judgeBinary, err, id)
	case err != nil:
		var ee *exec.ExitError
		if msg := judgeMessage(stderr.b.Bytes()); errors.As(err, &ee) && msg != "" {
			err = fmt.Errorf("%v: %s", err, msg)
		}
		return nil, fmt.Errorf("%s: %w", judgeBinary, err)
	case stdout.over:
		return nil, fmt.Errorf("%s: its answer is over %d bytes", judgeBinary, verifier.MaxJudgeAnswerBytes)
	}
	problems, err := verifier.ParseJudgeAnswer(stdout.b.Bytes())
	var se *verifier.SchemaError
	if err != nil && !errors.As(err, &se) {
		return nil, fmt.Errorf("%s: %w", judgeBinary, err)
	}
	return problems, err
}

// judgeMessage is what the judge said on stderr, on one line: its message
// without its name, or a Go runtime's fatal error without the goroutines
// that follow it (say, "runtime: out of memory: ...; fatal error: out of
// memory").
func judgeMessage(stderr []byte) string {
	msg, _, _ := bytes.Cut(bytes.TrimSpace(stderr), []byte("\n\n"))
	msg = bytes.TrimPrefix(msg, []byte(judgeBinary+": "))
	return safeText(strings.Join(strings.Fields(strings.ReplaceAll(string(msg), "\n", "; ")), " "))
}

// capped keeps the first max bytes written and notes that more came.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.b.Len(); n > room {
		c.over = true
		p = p[:room]
	}
	c.b.Write(p)
	return n, nil
}
