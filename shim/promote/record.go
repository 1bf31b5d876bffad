package promote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// RecordFile is an operation's promotion record: one spec.Promotion per
// line, appended, never rewritten.
const RecordFile = "promotions.jsonl"

// lockFile serializes promotions of one operation (two gensee promote
// runs): each holds an flock on it from its first read of the records to
// its last write.
const lockFile = ".promotions.lock"

// maxRecordBytes bounds promotions.jsonl as it is read: far above any
// real history (a line is a few KiB), it only stops a runaway file.
const maxRecordBytes = 64 << 20

// lock takes the operation's promotion lock; unlock releases it.
func lock(opDir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(opDir, lockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open promotion lock: %w", err)
	}
	if _, err := fsafe.RetryEINTR(func() (struct{}, error) { return struct{}{}, unix.Flock(int(f.Fd()), unix.LOCK_EX) }); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock promotions: %w", err)
	}
	return func() { f.Close() }, nil
}

// Records reads operation opID's promotion records, oldest first. A
// missing file is no promotion. A line that does not parse stops the read
// with an error that names it; the records before it are returned.
func Records(st record.Store, opID string) ([]spec.Promotion, error) {
	dir, err := st.OperationDir(opID)
	if err != nil {
		return nil, err
	}
	return readRecords(dir)
}

func readRecords(opDir string) ([]spec.Promotion, error) {
	b, err := fsafe.ReadFile(filepath.Join(opDir, RecordFile), maxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read promotions: %w", err)
	}
	var out []spec.Promotion
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		p, err := spec.ParsePromotion(line)
		if err != nil {
			return out, fmt.Errorf("%s line %d: %w", filepath.Join(opDir, RecordFile), i+1, err)
		}
		out = append(out, *p)
	}
	return out, nil
}

// appendRecord appends p to the operation's promotion record and makes it
// durable (the file, and the directory when the file is new).
func appendRecord(opDir string, p spec.Promotion) error {
	line, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode promotion: %w", err)
	}
	if _, err := spec.ParsePromotion(line); err != nil {
		return fmt.Errorf("check promotion record: %w", err)
	}
	path := filepath.Join(opDir, RecordFile)
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if statErr != nil {
		if err := record.SyncDir(opDir); err != nil {
			return err
		}
	}
	return f.Close()
}

// recorded reports whether records hold a promotion of the same receipt
// and product to the same destination.
func recorded(records []spec.Promotion, p spec.Promotion) bool {
	for _, r := range records {
		if r.ReceiptDigest == p.ReceiptDigest && r.Destination == p.Destination && r.Slot == p.Slot && r.ProductDigest == p.ProductDigest {
			return true
		}
	}
	return false
}
