package records

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// maxLine bounds one line of a log; a longer one is skipped (as the
// CLI's readers do).
const maxLine = 64 << 10

// pollBytes and pollLines bound the work of one Poll across all the logs
// it reads (refusals.jsonl and every operation's events.jsonl): at most
// pollBytes read and pollLines lines parsed, so the records one Poll holds
// before they are handed on and committed stay a few MiB of heap whatever
// the backlog (a first start, a reset cursor, downtime). The rest waits
// for the next Poll. pollBytes is well above maxLine: the first log read
// in a Poll always gets a whole line or passes over an over-long one, so
// every Poll moves on.
const (
	pollBytes = 4 << 20
	pollLines = 20000
)

// budget is what one Poll may still read.
type budget struct {
	bytes int64
	lines int
}

func newBudget() *budget { return &budget{bytes: pollBytes, lines: pollLines} }

// spent reports whether nothing more may be read in this Poll.
func (b *budget) spent() bool { return b.bytes <= 0 || b.lines <= 0 }

// follow feeds fn every complete line of the log at path past c, and
// moves c past each. A missing log yields nothing. A log under another
// inode than c's (rewritten: retention cut its oldest lines) or shorter
// than c's offset (truncated) is resumed after the line c took last, or
// from its start when that line is gone. A last line not yet ended by a
// newline is left for the next call. It reads no more than b allows, and
// charges b what it read. It returns how many lines were skipped as too
// long.
func follow(path string, c *fileCursor, b *budget, fn func(line []byte)) (skipped int, err error) {
	if b.spent() {
		return 0, nil
	}
	var ls unix.Stat_t
	if err := unix.Lstat(path, &ls); err == nil && ls.Mode&unix.S_IFMT == unix.S_IFREG &&
		uint64(ls.Dev) == c.Dev && ls.Ino == c.Ino && ls.Size == c.Offset {
		return 0, nil // unchanged since the last call: not even opened
	}
	f, st, err := fsafe.OpenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	moved := c.Ino != 0 && (c.Dev != uint64(st.Dev) || c.Ino != st.Ino) || st.Size < c.Offset
	if !moved && st.Size > c.Offset && !c.Skip {
		moved = !lastLineAt(f, c) // truncated in place, then written past the cursor
	}
	if moved {
		if c.Offset, err = resume(f, c); err != nil {
			return 0, err
		}
	}
	c.Dev, c.Ino = uint64(st.Dev), st.Ino
	if st.Size == c.Offset {
		return 0, nil
	}
	if _, err := f.Seek(c.Offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek log: %w", err)
	}
	return readLines(io.LimitReader(f, min(b.bytes, st.Size-c.Offset)), c, b, fn)
}

// readLines takes each complete line of r, moving c past it, while b
// has lines left. An unterminated tail is left for later, unless it is
// already longer than maxLine: then it is passed over and c skips
// through its newline.
func readLines(r io.Reader, c *fileCursor, b *budget, fn func(line []byte)) (skipped int, err error) {
	data, err := io.ReadAll(r)
	b.bytes -= int64(len(data))
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	for len(data) > 0 && b.lines > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > maxLine && !c.Skip {
				c.Offset, c.Skip = c.Offset+int64(len(data)), true
				skipped++
			} else if c.Skip {
				c.Offset += int64(len(data))
			}
			return skipped, nil
		}
		line := data[:i+1]
		data = data[i+1:]
		c.Offset += int64(len(line))
		if c.Skip {
			c.Skip = false
			continue
		}
		if len(line) > maxLine {
			skipped++
			continue
		}
		sum := sha256.Sum256(line)
		c.Last, c.LastLen = hex.EncodeToString(sum[:]), int64(len(line))
		b.lines--
		if l := bytes.TrimSpace(line); len(l) > 0 {
			fn(l)
		}
	}
	return skipped, nil
}

// resume is where to go on in a log that was rewritten or truncated: just
// past the last line whose sha256 is c.Last and that ends at or before
// c.Offset (a rewrite only drops the oldest lines, so what c had taken
// can only have moved towards the start), else 0.
func resume(f *os.File, c *fileCursor) (int64, error) {
	c.Skip = false
	if c.Last == "" {
		return 0, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek log: %w", err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var off, found int64
	for off < c.Offset {
		line, err := br.ReadBytes('\n')
		if err != nil { // EOF (an unterminated line is no line yet)
			break
		}
		off += int64(len(line))
		if off > c.Offset {
			break
		}
		if sum := sha256.Sum256(line); hex.EncodeToString(sum[:]) == c.Last {
			found = off
		}
	}
	return found, nil
}

// lastLineAt reports whether the line c took last still ends at c.Offset.
func lastLineAt(f *os.File, c *fileCursor) bool {
	if c.Last == "" || c.LastLen <= 0 || c.LastLen > c.Offset {
		return true // nothing to check against
	}
	b := make([]byte, c.LastLen)
	if _, err := f.ReadAt(b, c.Offset-c.LastLen); err != nil {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == c.Last
}
