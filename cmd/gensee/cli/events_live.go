package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/spec"
)

// subscriberBinary subscribes to containerd's events for --follow
// (cmd/gensee-events), installed beside gensee: the CLI never links gRPC
// or containerd's protobuf types, whose initialisation would slow every
// gensee command.
const subscriberBinary = "gensee-events"

// maxLiveLine bounds one line the subscriber hands over (an event's fields
// are bounded far below it).
const maxLiveLine = 1 << 20

// warningPrefix starts a subscriber's line on stderr that is a warning
// (passed on); any other line is why it stopped.
const warningPrefix = "gensee: warning: "

// watchContainerd runs gensee-events beside gensee, subscribed to the
// daemon at address, and prints gensee's events it hands over until ctx is
// done.
func watchContainerd(ctx context.Context, env *Env, address string, asJSON bool) error {
	bin, err := openSubscriber(fsafe.OpenTrustedSibling(subscriberBinary))
	if err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, err, "")
	}
	defer bin.Close()
	c := exec.Command("/proc/self/fd/"+strconv.Itoa(int(bin.Fd())), "--address", address)
	c.Args[0] = subscriberBinary
	c.Env = []string{}
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	errOut, err := c.StderrPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, fmt.Errorf("start %s: %w", subscriberBinary, err), "")
	}
	lines := make(chan []byte)
	go handedLines(out, lines)
	why := make(chan string, 1)
	go func() { why <- relayWarnings(errOut, env.Stderr) }()
	ended := func() error {
		msg := <-why
		err := c.Wait()
		if ctx.Err() != nil {
			return nil
		}
		if msg == "" {
			msg = "the daemon ended the subscription"
			if err != nil {
				msg = fmt.Sprintf("%s: %v", subscriberBinary, err)
			}
		}
		return errors.New(msg)
	}
	stop := func() { c.Process.Kill() }
	if err := watchLines(ctx, env, asJSON, lines, stop, ended); err != nil {
		return fail(ExitUsage, "subscribe to containerd events at "+address, err,
			"check --address names containerd's socket and that you may use it (root)")
	}
	return nil
}

// openSubscriber takes gensee-events as fsafe.OpenTrustedSibling opened it
// (a regular executable beside gensee, as trusted as gensee's binary), to
// run from that fd. A missing or untrusted one is an error that says how
// to install it.
func openSubscriber(f *os.File, err error) (*os.File, error) {
	var ue *fsafe.UntrustedError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: install %s beside gensee; make build puts both in bin/", err, subscriberBinary)
	case errors.As(err, &ue) && filepath.Base(ue.Path) == subscriberBinary:
		return nil, fmt.Errorf("%w: install %s again beside gensee (make build puts both in bin/)", err, subscriberBinary)
	case errors.As(err, &ue):
		return nil, fmt.Errorf("%w, above %s: install gensee in a directory only root may write", err, subscriberBinary)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", subscriberBinary, err)
	}
	return f, nil
}

// handedLines sends each line of r (up to maxLiveLine) on lines, closing it
// at the end.
func handedLines(r io.Reader, lines chan<- []byte) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLiveLine)
	for sc.Scan() {
		lines <- bytes.Clone(sc.Bytes())
	}
}

// relayWarnings passes the subscriber's warnings on to w and returns its
// last other line: why it stopped ("" when it said nothing).
func relayWarnings(r io.Reader, w io.Writer) string {
	why := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, warningPrefix) {
			fmt.Fprintln(w, safeText(line))
			continue
		}
		why = safeText(line)
	}
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
			spec.AttentionControlDefeat, safeText(a.Signature), safeText(events.Redact(a.Detail)), safeText(orText(events.Redact(a.Evidence), "none")))
		return err
	}
	p := eventPrinter{w: env.Stdout, prefix: safeText(line.Namespace) + "  " + safeText(orText(line.Event.OperationID, "-")) + "  "}
	return p.print(*line.Event)
}
