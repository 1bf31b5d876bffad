package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

type refusalsOptions struct {
	config, container, reason string
	follow, json              bool
}

func refusalsCommand() *Command {
	return &Command{
		Name:    "refusals",
		Summary: "show the admission refusals that never became an operation, or follow them",
		Args:    "[-n NS] [--container ID] [--reason R] [--follow] [--json] [--config F]",
		Long: `Reads <state_dir>/refusals.jsonl, where the runtime (containers, host
runs, the OCI hooks) keeps every task it refused before anything ran, and
prints one row per refusal, oldest first: time (local), namespace,
container (or the user of a host run), reason, message (with the field
refused and the fix). -n NS (or $CONTAINERD_NAMESPACE), --container ID
and --reason R keep only matching lines. --json prints the matching lines
as the log stores them (JSON lines).

--follow prints the log, then every refusal appended to it, until
interrupted (SIGINT or SIGTERM: exit 0); the records retention may cut the
log at its oldest end meanwhile, which --follow goes on through.
Lines that do not parse (a torn write) are skipped and counted.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o refusalsOptions
			addConfigFlag(fs, &o.config)
			fs.StringVar(&o.container, "container", "", "only refusals of container `ID` (or a host run's user)")
			fs.StringVar(&o.reason, "reason", "", "only refusals for reason `R` (e.g. no_inference, spec_refused)")
			fs.BoolVar(&o.follow, "follow", false, "keep printing refusals as they are appended, until interrupted")
			fs.BoolVar(&o.json, "json", false, "print JSON lines as stored instead of rows")
			return o.run
		},
	}
}

// who names what a refusal line refused: the container, or the user of a
// host run.
func who(l spec.RefusalRecord) string {
	switch {
	case l.ContainerID != "":
		return l.ContainerID
	case l.User != "":
		return l.User
	case l.UID != nil:
		return "uid " + strconv.FormatUint(uint64(*l.UID), 10)
	}
	return "-"
}

// refusalText is a line's message as a row shows it: the field first
// unless the message names it already, then the fix.
func refusalText(l spec.RefusalRecord) string {
	s := l.Message
	if l.Field != "" && !strings.Contains(s, l.Field) {
		s = l.Field + ": " + s
	}
	if l.Fix != "" {
		s += "; " + l.Fix
	}
	return s
}

// maxRefusalLine bounds one line; a longer one is skipped as malformed.
const maxRefusalLine = 1 << 20

func (o *refusalsOptions) run(ctx context.Context, env *Env) error {
	cfg, err := env.operatorConfig(o.config)
	if err != nil {
		return err
	}
	path := record.Store{Dir: cfg.StateDir}.RefusalsPath()
	p := &refusalPrinter{o: o, env: env, ns: env.globals()}
	if o.follow {
		err = followRefusals(ctx, path, p)
	} else {
		err = readRefusals(path, p)
		if errors.Is(err, fs.ErrNotExist) {
			p.notes().Write([]byte("no refusal recorded\n"))
			return nil
		}
	}
	if err != nil {
		return fail(ExitUsage, "read refusals in "+path, err, "run as root, or pass --config F naming the runtime's state_dir")
	}
	if p.n == 0 && !o.follow {
		fmt.Fprintln(p.notes(), "no refusal matches")
	}
	if p.malformed > 0 {
		fmt.Fprintf(p.notes(), "%s skipped (a torn write)\n", plural(p.malformed, "malformed line"))
	}
	return nil
}

// refusalPrinter filters and prints refusal lines.
type refusalPrinter struct {
	o            *refusalsOptions
	env          *Env
	ns           *globalOptions
	n, malformed int
	header       bool
}

// notes is where what is not a refusal goes: stderr with --json.
func (p *refusalPrinter) notes() io.Writer {
	if p.o.json {
		return p.env.Stderr
	}
	return p.env.Stdout
}

func (p *refusalPrinter) line(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	var l spec.RefusalRecord
	if len(raw) > maxRefusalLine || json.Unmarshal(raw, &l) != nil {
		p.malformed++
		return nil
	}
	switch {
	case p.ns.namespaceSet && l.Namespace != p.ns.namespace,
		p.o.container != "" && p.o.container != who(l),
		p.o.reason != "" && p.o.reason != l.Reason:
		return nil
	}
	p.n++
	if p.o.json {
		_, err := p.env.Stdout.Write(append(raw, '\n'))
		return err
	}
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.env.Stdout, "%-23s  %-10s  %-20s  %-22s  %s\n", "TIME", "NAMESPACE", "CONTAINER", "REASON", "MESSAGE"); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.env.Stdout, "%-23s  %-10s  %-20s  %-22s  %s\n", l.At.Local().Format(events.RowTime),
		safeText(orText(l.Namespace, "-")), safeText(who(l)), safeText(orText(l.Reason, "-")), safeText(events.Redact(refusalText(l))))
	return err
}

// readRefusals prints every line of the log at path.
func readRefusals(path string, p *refusalPrinter) error {
	f, err := openLog(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = readLines(bufio.NewReaderSize(f, 64<<10), p.line, true)
	return err
}

// readLines feeds each complete line of r to fn, and the last unterminated
// one too when final. It returns the bytes consumed.
func readLines(r *bufio.Reader, fn func([]byte) error, final bool) (int64, error) {
	var n int64
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if final && len(line) > 0 {
				n += int64(len(line))
				return n, fn(line)
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(line))
		if err := fn(line); err != nil {
			return n, err
		}
	}
}

// openLog opens the log without following a symlink, refusing anything
// but a regular file.
func openLog(path string) (*os.File, error) {
	f, _, err := fsafe.OpenFile(path)
	return f, err
}

// followRefusals prints the log, then what is appended, until ctx is done.
// When the retention rewrites the log (a new file at the path), it goes on
// in the new file after the last line it printed: the rewrite only ever
// drops the oldest lines, so that line is either still there or every line
// kept is newer.
func followRefusals(ctx context.Context, path string, p *refusalPrinter) error {
	var (
		f    *os.File
		off  int64
		last []byte
		tick = time.NewTicker(250 * time.Millisecond)
	)
	defer tick.Stop()
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	print := func(line []byte) error {
		last = append(last[:0], line...)
		return p.line(line)
	}
	for {
		if f == nil {
			nf, err := openLog(path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			f = nf
		}
		if f != nil {
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				return err
			}
			n, err := readLines(bufio.NewReader(f), print, false)
			if err != nil {
				return err
			}
			off += n
			if nf := reopened(path, f); nf != nil {
				f.Close()
				f, off = nf, after(nf, last)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// reopened opens the file path names when it is no longer f (the log was
// rewritten), else returns nil.
func reopened(path string, f *os.File) *os.File {
	var held, now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &now) != nil {
		return nil
	}
	if held.Ino == now.Ino && held.Dev == now.Dev {
		return nil
	}
	nf, err := openLog(path)
	if err != nil {
		return nil
	}
	return nf
}

// after is the offset just past line in f, or 0 when f does not hold it.
func after(f *os.File, line []byte) int64 {
	if len(line) == 0 {
		return 0
	}
	var off, found int64
	readLines(bufio.NewReader(f), func(l []byte) error {
		off += int64(len(l))
		if bytes.Equal(l, line) {
			found = off
		}
		return nil
	}, false)
	return found
}
