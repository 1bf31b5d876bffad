package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// subscriberBinary subscribes to containerd's events for --follow
// (cmd/gensee-events), installed beside gensee: the CLI never links gRPC
// or containerd's protobuf types, whose initialisation would slow every
// gensee command.
const subscriberBinary = "gensee-events"

// maxLiveLine bounds one line the subscriber hands over: a longer one (a
// publisher's oversized field) is skipped with a warning.
const maxLiveLine = 1 << 20

// warningPrefix starts a subscriber's line on stderr that is a warning
// (passed on); any other line is why it stopped.
const warningPrefix = "gensee: warning: "

// watchContainerd runs gensee-events beside gensee, subscribed to the
// daemon at address, and prints gensee's events it hands over until ctx is
// done.
func watchContainerd(ctx context.Context, env *Env, address string, asJSON bool) error {
	bin, err := openBeside(subscriberBinary)(fsafe.OpenTrustedSibling(subscriberBinary))
	if err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, err, "")
	}
	defer bin.Close()
	c := exec.Command("/proc/self/fd/"+strconv.Itoa(int(bin.Fd())), "--address", address)
	c.Args[0] = subscriberBinary
	c.Env = []string{}
	c.Dir = "/"
	// Its own process group: a terminal's ^C (or a group's SIGTERM)
	// reaches gensee alone, which then stops it (ctx).
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	errOut, err := c.StderrPipe()
	if err != nil {
		return err
	}
	// Only its three pipes reach it: every fd gensee inherited closes at
	// its exec (the binary's fd is the exec's path, resolved before).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("mark inherited fds close-on-exec: %w", err)
	}
	if err := c.Start(); err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, fmt.Errorf("start %s: %w", subscriberBinary, err), "")
	}
	lines := make(chan []byte)
	go handedLines(out, lines, env)
	why := make(chan string, 1)
	go func() { why <- relayWarnings(errOut, env.Stderr) }()
	stop := func() { c.Process.Kill() }
	ended := func() error {
		// Its stdout ended: it exited, or stopped reading (stop makes
		// sure, so its stderr ends too).
		stop()
		msg := <-why
		err := c.Wait()
		if ctx.Err() != nil {
			return nil
		}
		return subscriberEnded(msg, err)
	}
	if err := watchLines(ctx, env, asJSON, lines, stop, ended); err != nil {
		var se *subscriberError
		if errors.As(err, &se) {
			return fail(ExitUsage, "follow containerd events at "+address, err,
				"run it again; if it stops again, install "+subscriberBinary+" again beside gensee (make build puts both in bin/)")
		}
		return fail(ExitUsage, "subscribe to containerd events at "+address, err,
			"check --address names containerd's socket and that you may use it (root)")
	}
	return nil
}

// subscriberError: gensee-events stopped without saying why (a signal, a
// crash), not because of the subscription.
type subscriberError struct{ err error }

func (e *subscriberError) Error() string {
	return fmt.Sprintf("%s stopped unexpectedly: %v", subscriberBinary, e.err)
}

// subscriberEnded says why the subscription ended: gensee-events' message
// (msg), else how it exited (err).
func subscriberEnded(msg string, err error) error {
	var ee *exec.ExitError
	switch {
	case msg != "" && (err == nil || errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == 1):
		return errors.New(msg)
	case err == nil:
		return errors.New("the daemon ended the subscription")
	case msg != "":
		return &subscriberError{fmt.Errorf("%w (%s)", err, msg)}
	}
	return &subscriberError{err}
}

// handedLines sends each line of r on lines, closing it at the end; a line
// over maxLiveLine is skipped with a warning.
func handedLines(r io.Reader, lines chan<- []byte, env *Env) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case over:
		case len(line)+len(chunk) > maxLiveLine:
			over, line = true, nil
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if over {
			env.warnf("skip a line of %s: longer than %d bytes", subscriberBinary, maxLiveLine)
		} else if len(line) > 0 {
			lines <- bytes.TrimSuffix(line, []byte("\n"))
		}
		line, over = nil, false
		if err != nil {
			return
		}
	}
}

// relayWarnings passes the subscriber's warnings on to w and returns why
// it stopped: its last other line, or a panic's first ("" when it said
// nothing).
func relayWarnings(r io.Reader, w io.Writer) string {
	why, panicked := "", false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, warningPrefix):
			fmt.Fprintln(w, safeText(line))
		case panicked:
		default:
			why = safeText(line)
			panicked = strings.HasPrefix(line, "panic: ")
		}
	}
	io.Copy(io.Discard, r) // a line past the bound: read to the end, so the subscriber never blocks on it
	return why
}

// watchLines prints the lines the subscriber hands over until ctx is done
// (stop, then nil) or they end (ended says why; nil when ctx ended them).
func watchLines(ctx context.Context, env *Env, asJSON bool, lines <-chan []byte, stop func(), ended func() error) error {
	for {
		select {
		case <-ctx.Done():
			stop()
			for range lines {
			}
			ended()
			return nil
		case l, ok := <-lines:
			if !ok {
				return ended()
			}
			if err := printLine(env, asJSON, l); err != nil {
				return err
			}
		}
	}
}

// printLine prints one line the subscriber handed over: a row (or, with
// asJSON, the line again, as decoded). What does not decode as a gensee
// event or attention is skipped with a warning.
func printLine(env *Env, asJSON bool, b []byte) error {
	var line events.LiveLine
	err := json.Unmarshal(b, &line)
	switch {
	case err != nil:
	case (line.Event == nil) == (line.Attention == nil):
		err = errors.New("neither one event nor one attention")
	case line.Event != nil:
		*line.Event = events.Sanitize(*line.Event)
		err = line.Event.Validate()
	case line.Attention.Signature == "":
		err = errors.New("an attention without a signature")
	default:
		line.Attention.Detail, line.Attention.Evidence = events.Redact(line.Attention.Detail), events.Redact(line.Attention.Evidence)
	}
	if err != nil {
		env.warnf("skip a line of %s: %v", subscriberBinary, err)
		return nil
	}
	if asJSON {
		out, err := json.Marshal(line)
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(append(out, '\n'))
		return err
	}
	if a := line.Attention; a != nil {
		_, err := fmt.Fprintf(env.Stdout, "%s  %s  %s  ATTENTION %s  %s  %s  (evidence: %s)\n",
			safeText(line.Namespace), safeText(a.OperationID), a.At.Local().Format(events.RowTime),
			spec.AttentionControlDefeat, safeText(a.Signature), safeText(a.Detail), safeText(orText(a.Evidence, "none")))
		return err
	}
	p := eventPrinter{w: env.Stdout, prefix: safeText(line.Namespace) + "  " + safeText(orText(line.Event.OperationID, "-")) + "  "}
	return p.print(*line.Event)
}
