package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// Contents is what Read found in an event log.
type Contents struct {
	Events    []spec.Event
	Dropped   uint64 // events never written: the log was full
	Malformed int    // lines that did not parse (a torn write), skipped
}

// Read reads the event log at path and its dropped count. A missing log is
// an error the caller can test with errors.Is(err, fs.ErrNotExist).
func Read(path string) (Contents, error) {
	var c Contents
	f, _, err := fsafe.OpenFile(path)
	if err != nil {
		return c, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	var d lineDecoder
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		d.feed(buf[:n], func(e spec.Event) { c.Events = append(c.Events, e) })
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c, fmt.Errorf("read events %s: %w", path, err)
		}
	}
	d.finish()
	c.Malformed = d.malformed
	dc, err := readDropped(path)
	if err != nil {
		return c, err
	}
	c.Dropped = dc.Dropped
	return c, nil
}

// Follow calls fn for every event in the log at path, then for each event
// appended later, polling every interval (250 ms if <= 0), until ctx is
// done (then it returns nil) or fn returns an error (returned as is). A log
// that does not exist yet is waited for.
func Follow(ctx context.Context, path string, interval time.Duration, fn func(spec.Event) error) error {
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	var (
		f    *os.File
		d    lineDecoder
		ferr error
		buf  = make([]byte, 64<<10)
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	emit := func(e spec.Event) {
		if ferr == nil {
			ferr = fn(e)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if f == nil {
			var err error
			f, _, err = fsafe.OpenFile(path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("follow events: %w", err)
			}
		}
		for f != nil {
			n, err := f.Read(buf)
			d.feed(buf[:n], emit)
			if ferr != nil {
				return ferr
			}
			if errors.Is(err, io.EOF) || n == 0 {
				break
			}
			if err != nil {
				return fmt.Errorf("follow events %s: %w", path, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lineDecoder splits a byte stream into events.jsonl lines, keeping an
// unfinished last line for the next feed. Lines longer than
// spec.MaxEventBytes or that do not parse are counted and skipped.
type lineDecoder struct {
	buf       []byte
	skipping  bool // inside an over-long line: drop through its newline
	malformed int
}

func (d *lineDecoder) feed(data []byte, emit func(spec.Event)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			d.hold(data)
			return
		}
		d.hold(data[:i])
		if !d.skipping {
			d.line(d.buf, emit)
		}
		d.buf, d.skipping = d.buf[:0], false
		data = data[i+1:]
	}
}

func (d *lineDecoder) hold(b []byte) {
	if d.skipping {
		return
	}
	if len(d.buf)+len(b) > spec.MaxEventBytes {
		d.malformed++
		d.buf, d.skipping = d.buf[:0], true
		return
	}
	d.buf = append(d.buf, b...)
}

func (d *lineDecoder) line(b []byte, emit func(spec.Event)) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	e, err := spec.ParseEvent(b)
	if err != nil {
		d.malformed++
		return
	}
	emit(*e)
}

// finish counts an unterminated last line as malformed (a torn write; a
// Log never leaves one behind).
func (d *lineDecoder) finish() {
	if len(bytes.TrimSpace(d.buf)) > 0 {
		d.malformed++
	}
	d.buf = d.buf[:0]
}
