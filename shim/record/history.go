package record

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// The history index names, per command digest, the operations whose
// manifest was written with it: <state>/history/<hex>.jsonl, one
// spec.HistoryRef a line, oldest first. The runtime names the newest of
// them to a node analyzer (spec.AnalyzerRequest.History), which reads the
// manifests themselves and checks their sha256.
//
// The index is a hint, not a record: its lines are appended and rewritten
// without fsync (a crash of the machine may lose the last ones; the
// manifests stay durable), a failure to index never fails the manifest,
// and an operation retention removed leaves a line naming nothing until
// it ages out.
const (
	historyDir = "history"
	// HistoryKeep bounds the lines of one command's history.
	HistoryKeep = 64
	// maxHistoryBytes bounds the history file read; HistoryKeep lines
	// take about 8 KiB.
	maxHistoryBytes = 64 << 10
)

// historyPath is the history file of command digest "sha256:<hex>".
func (s Store) historyPath(commandDigest string) (string, error) {
	h, ok := strings.CutPrefix(commandDigest, "sha256:")
	if !ok || !isHex64(h) {
		return "", fmt.Errorf("command digest %q is not sha256:<64 hex>", commandDigest)
	}
	return filepath.Join(s.Dir, historyDir, h+".jsonl"), nil
}

// AppendHistory indexes manifest (the exact bytes written as operation
// id's manifest.json) under its command digest, keeping the newest
// HistoryKeep lines: over that, the file is rewritten atomically. Writers
// of the same digest (several shims) hold the file's flock, as the
// refusals log's do (AppendRefusal).
func (s Store) AppendHistory(commandDigest, id string, manifest []byte) error {
	if !ValidOperationID(id) {
		return fmt.Errorf("index manifest: operation id %q is malformed", id)
	}
	p, err := s.historyPath(commandDigest)
	if err != nil {
		return fmt.Errorf("index manifest: %w", err)
	}
	sum := sha256.Sum256(manifest)
	line, err := json.Marshal(spec.HistoryRef{OperationID: id, ManifestSHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return fmt.Errorf("index manifest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create history dir: %w", err)
	}
	for range 8 {
		f, err := lockFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, "history")
		if errors.Is(err, errReplaced) {
			continue
		}
		if err != nil {
			return err
		}
		err = appendLocked(f, p, append(line, '\n'))
		f.Close() // releases the lock, after a rewrite's rename
		return err
	}
	return errors.New("index manifest: the history kept being replaced")
}

// appendLocked appends line to the locked history file f at p, or
// rewrites p with the newest lines when f is full, over its bound or
// holds a torn line.
func appendLocked(f *os.File, p string, line []byte) error {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxHistoryBytes+1))
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	lines := bytes.SplitAfter(data, []byte{'\n'})
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	whole := len(data) == 0 || data[len(data)-1] == '\n'
	if whole && len(data) <= maxHistoryBytes && len(lines) < HistoryKeep {
		// One write(2) of one line under O_APPEND.
		if _, err := f.Write(line); err != nil {
			return fmt.Errorf("append history: %w", err)
		}
		return nil
	}
	var kept [][]byte
	for _, l := range lines {
		if _, ok := parseRef(l); ok {
			kept = append(kept, l)
		}
	}
	kept = append(kept[max(0, len(kept)-(HistoryKeep-1)):], line)
	if err := ReplaceFile(p, bytes.Join(kept, nil), 0o600); err != nil {
		return fmt.Errorf("rewrite history: %w", err)
	}
	return nil
}

// History returns up to n references to earlier manifests written with
// command digest, newest first, each operation once; none when the
// digest has no history. Malformed lines are skipped.
func (s Store) History(commandDigest string, n int) ([]spec.HistoryRef, error) {
	p, err := s.historyPath(commandDigest)
	if err != nil {
		return nil, err
	}
	data, err := fsafe.ReadFile(p, maxHistoryBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	lines := bytes.Split(data, []byte{'\n'})
	var out []spec.HistoryRef
	seen := map[string]bool{}
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		r, ok := parseRef(lines[i])
		if ok && !seen[r.OperationID] {
			seen[r.OperationID] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// parseRef decodes one history line (its newline optional).
func parseRef(line []byte) (spec.HistoryRef, bool) {
	var r spec.HistoryRef
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line) == 0 || spec.DecodeStrict(line, &r, 1024) != nil {
		return r, false
	}
	return r, ValidOperationID(r.OperationID) && isHex64(r.ManifestSHA256)
}

// isHex64 reports whether s is 64 lowercase hex digits.
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
