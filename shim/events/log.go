package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// DefaultLimit bounds an operation's events.jsonl: a workload that is
// denied in a tight loop must not fill the state directory.
const DefaultLimit = 1 << 20

// DroppedSuffix names the sidecar of a log (events.jsonl.dropped) that
// counts the events not written because the log was full.
const DroppedSuffix = ".dropped"

// DroppedCount is the sidecar's content.
type DroppedCount struct {
	Dropped    uint64    `json:"dropped"`
	LimitBytes int64     `json:"limit_bytes"`
	LastAt     time.Time `json:"last_at"` // the dropped event's own time
}

// Log appends events to one operation's events.jsonl. Each event is one
// line written with one write(2) and fsynced before Append returns
// (AppendDeferred: before the next Append or Close returns). Once
// the file would exceed its limit, events are counted in the sidecar
// instead of written. Safe for concurrent use.
type Log struct {
	path  string
	limit int64

	mu      sync.Mutex // guards everything below
	f       *os.File
	size    int64
	dirty   bool // written since the last fsync
	dropped DroppedCount
}

// OpenLog opens (creating it 0600) the log at path, bounded to limit bytes
// (DefaultLimit if limit <= 0), and picks up a dropped count left by an
// earlier shim of the same operation.
func OpenLog(path string, limit int64) (_ *Log, retErr error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	defer func() {
		if retErr != nil {
			f.Close()
		}
	}()
	l := &Log{path: path, limit: limit, f: f}
	if l.size, err = seal(path, f); err != nil {
		return nil, err
	}
	if l.dropped, err = readDropped(path); err != nil {
		return nil, err
	}
	l.dropped.LimitBytes = limit
	return l, nil
}

// seal ends a line a crashed writer left unterminated, so the next event
// starts on its own line (Read skips the torn one), and returns the size.
func seal(path string, f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat event log: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return 0, nil
	}
	r, _, err := fsafe.OpenFile(path)
	if err != nil {
		return 0, fmt.Errorf("open event log: %w", err)
	}
	defer r.Close()
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, size-1); err != nil {
		return 0, fmt.Errorf("read event log: %w", err)
	}
	if last[0] != '\n' {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return 0, fmt.Errorf("seal event log: %w", err)
		}
		size++
	}
	return size, nil
}

// reserved are the kinds a finding is made of: a control_defeat and the
// kinds its evidence comes from that only a defeat produces. Routine
// events (denials, refusals, hints) stop at the limit less the reserve,
// so a log filled by them still takes these.
var reserved = map[string]bool{spec.EventControlDefeat: true, spec.EventTableTampered: true,
	spec.EventPolicyUnbound: true, spec.EventProductMismatch: true}

// capFor is how large the log may grow with an event of kind: the limit
// for the reserved kinds, the limit less a sixteenth (64 KiB of the
// default 1 MiB) for the rest. Past the limit a reserved event is counted
// as dropped too; its finding is also in the attention record.
func (l *Log) capFor(kind string) int64 {
	if reserved[kind] {
		return l.limit
	}
	return l.limit - l.limit/16
}

// Append sanitizes e, checks it, and writes it, or counts it as dropped if
// the log is full. A dropped event is not an error.
func (l *Log) Append(e spec.Event) error { return l.append(e, true) }

// AppendDeferred is Append without the fsync: the event is durable once the
// next Append or Close returns. The exit path appends its last events
// so, and syncs them beside the manifest's own fsync.
func (l *Log) AppendDeferred(e spec.Event) error { return l.append(e, false) }

func (l *Log) append(e spec.Event, durable bool) error {
	e = Sanitize(e)
	if err := e.Validate(); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	line = append(line, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("append event to %s: %w", l.path, fs.ErrClosed)
	}
	if l.size+int64(len(line)) > l.capFor(e.Kind) {
		l.dropped.Dropped++
		l.dropped.LastAt = e.At
		return l.writeDropped()
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	l.dirty = true
	if err != nil {
		return fmt.Errorf("append event to %s: %w", l.path, err)
	}
	if !durable {
		return nil
	}
	return l.syncLocked()
}

func (l *Log) syncLocked() error {
	if !l.dirty {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync event log %s: %w", l.path, err)
	}
	l.dirty = false
	return nil
}

// Dropped is how many events were not written because the log was full.
func (l *Log) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped.Dropped
}

// Close makes what was appended durable and closes the log. Appends after
// Close fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	serr := l.syncLocked()
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close event log %s: %w", l.path, err)
	}
	return serr
}

// writeDropped persists the count atomically. Called with mu held.
func (l *Log) writeDropped() error {
	b, err := json.Marshal(l.dropped)
	if err != nil {
		return fmt.Errorf("encode dropped count: %w", err)
	}
	if err := record.WriteFileAtomic(l.path+DroppedSuffix, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("count dropped event: %w", err)
	}
	return nil
}

// maxDroppedBytes bounds the dropped-count sidecar: one short JSON object.
const maxDroppedBytes = 4096

// readDropped reads the sidecar of the log at path; absent means none.
func readDropped(path string) (DroppedCount, error) {
	var d DroppedCount
	b, err := fsafe.ReadFile(path+DroppedSuffix, maxDroppedBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read dropped count: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("read dropped count %s: %w", path+DroppedSuffix, err)
	}
	return d, nil
}
