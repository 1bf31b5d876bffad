package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
)

// cursorVersion is the cursor file's layout; another is started afresh.
const cursorVersion = 1

// maxCursorBytes bounds the cursor file (a few hundred bytes per retained
// operation; retention keeps 5000 by default).
const maxCursorBytes = 64 << 20

// cursor is where the reader is: saved by Commit, loaded by Open.
type cursor struct {
	Version    int                  `json:"version"`
	Refusals   fileCursor           `json:"refusals"`
	Operations map[string]*opCursor `json:"operations"`
}

// fileCursor is a position in an append-only log: the file (device and
// inode), the offset past the last complete line taken, and that line's
// sha256 (hex), by which the place is found again in a rewritten log.
type fileCursor struct {
	Dev    uint64 `json:"dev,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Offset int64  `json:"offset"`
	Last   string `json:"last,omitempty"`
	// LastLen is that line's length: Poll checks it still ends at Offset.
	LastLen int64 `json:"last_len,omitempty"`
	// Skip: the offset is inside a line longer than maxLine, passed over
	// through its newline.
	Skip bool `json:"skip,omitempty"`
}

// opCursor is what was reported of one operation.
type opCursor struct {
	Admitted bool       `json:"admitted,omitempty"`
	Manifest bool       `json:"manifest,omitempty"`
	Events   fileCursor `json:"events"`
	Findings int        `json:"findings,omitempty"`
}

// loadCursor reads the cursor at path; a missing one (a first start) or
// one of another version is a fresh cursor.
func loadCursor(path string) (cursor, error) {
	fresh := cursor{Version: cursorVersion, Operations: map[string]*opCursor{}}
	b, err := fsafe.ReadFile(path, maxCursorBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return fresh, fmt.Errorf("read cursor: %w", err)
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return fresh, fmt.Errorf("read cursor %s: %w; remove it to start from the records' beginning", path, err)
	}
	if c.Version != cursorVersion {
		return fresh, nil
	}
	if c.Operations == nil {
		c.Operations = map[string]*opCursor{}
	}
	return c, nil
}

// save writes the cursor at path atomically and durably, unless it is
// what was saved last (saved, updated): an idle node writes nothing.
func (c *cursor) save(path string, saved *[]byte) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode cursor: %w", err)
	}
	if bytes.Equal(b, *saved) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create cursor dir: %w", err)
	}
	if err := fsafe.WriteFile(path, bytes.NewReader(b), 0o600, fsafe.Durable); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	*saved = b
	return nil
}
