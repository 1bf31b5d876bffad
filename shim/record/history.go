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
	"slices"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// The history index names, per observation digest (the stable one the
// manifest records), the operations admitted under an inference whose
// manifest was written with it: <state>/history/<hex>.jsonl, one
// HistoryLine a line, oldest first. The runtime names them to a node
// analyzer (spec.AnalyzerRequest.History), which reads the manifests
// themselves, checks their sha256 and judges them again.
//
// The index keeps what withholds a class: once it holds historyTrimAt
// lines it is trimmed back to HistoryKeep, dropping a line naming a
// removed operation first, then the oldest clean or uncertain one, and the
// oldest unclean one only when every line is unclean. So an unclean run is
// named for as long as its record is kept; removing the operation (gensee
// prune, retention) is what clears it. Trimming by half the file at a time
// keeps the rewrite (every line parsed, every operation looked up) off all
// but one append in HistoryKeep: the others are one write(2).
//
// The index is a hint, not a record: its lines are appended and rewritten
// without fsync (a crash of the machine may lose the last ones; the
// manifests stay durable), and a failure to index never fails the
// manifest.
const (
	historyDir = "history"
	// HistoryKeep is how many lines of one observation's history a trim
	// keeps; historyTrimAt, how many make an append trim.
	HistoryKeep   = 64
	historyTrimAt = 2 * HistoryKeep
	// maxHistoryBytes bounds the history file read, and maxHistoryLine
	// a line AppendHistory writes (newline included), so that the
	// historyTrimAt-1 lines a file holds before a trim always fit: about
	// 200 bytes a line, 440 with 128-character analyzer and class ids.
	maxHistoryBytes = 64 << 10
	maxHistoryLine  = maxHistoryBytes / historyTrimAt
)

// HistoryLine is one line of the history index: the operation, the
// sha256 of its manifest's bytes, the analyzer whose inference admitted
// it, the class (spec.Manifest.HistoryClass) and how it ended
// (spec.Manifest.HistoryVerdict).
type HistoryLine struct {
	OperationID    string              `json:"operation_id"`
	ManifestSHA256 string              `json:"manifest_sha256"`
	Analyzer       string              `json:"analyzer"`
	Class          string              `json:"class"`
	Verdict        spec.HistoryVerdict `json:"verdict"`
}

// group is what an unclean line withholds: its analyzer's class.
func (h HistoryLine) group() string { return h.Analyzer + "\x00" + h.Class }

// historyPath is the history file of observation digest "sha256:<hex>".
func (s Store) historyPath(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || !spec.IsHex64(h) {
		return "", fmt.Errorf("observation digest %q is not sha256:<64 hex>", digest)
	}
	return filepath.Join(s.Dir, historyDir, h+".jsonl"), nil
}

// AppendHistory indexes m, whose exact bytes are operation id's
// manifest.json, under its observation digest with its verdict. A run not
// admitted by an inference (m.HistoryClass() is "") is not indexed. It may
// run beside the manifest's own write (into the operation's directory,
// which is there before): a trim drops a line as gone only once its
// operation's directory is, never while a manifest may be on its way, and
// a reader skips a line whose manifest is not there (History). At
// historyTrimAt lines the file is rewritten atomically, trimmed to
// HistoryKeep (see the package's history comment for what is dropped).
// Writers of the same digest (several shims) hold the file's flock, as the
// refusals log's do (AppendRefusal).
func (s Store) AppendHistory(id string, m *spec.Manifest, manifest []byte) error {
	if m.HistoryClass() == "" {
		return nil
	}
	if !ValidOperationID(id) {
		return fmt.Errorf("index manifest: operation id %q is malformed", id)
	}
	p, err := s.historyPath(m.ObservationDigest)
	if err != nil {
		return fmt.Errorf("index manifest: %w", err)
	}
	sum := sha256.Sum256(manifest)
	verdict, _ := m.HistoryVerdict()
	line, err := json.Marshal(HistoryLine{OperationID: id, ManifestSHA256: hex.EncodeToString(sum[:]),
		Analyzer: m.Inference.Analyzer, Class: m.HistoryClass(), Verdict: verdict})
	if err != nil {
		return fmt.Errorf("index manifest: %w", err)
	}
	if len(line)+1 > maxHistoryLine {
		return fmt.Errorf("index manifest: its history line takes %d bytes, over %d (analyzer and class ids too long)", len(line)+1, maxHistoryLine)
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
		err = s.appendLocked(f, p, append(line, '\n'))
		f.Close() // releases the lock, after a rewrite's rename
		return err
	}
	return errors.New("index manifest: the history kept being replaced")
}

// appendLocked appends line to the locked history file f at p, or
// rewrites p trimmed to HistoryKeep lines (trimHistory) when f holds
// historyTrimAt lines, is over its bound or holds a torn line.
func (s Store) appendLocked(f *os.File, p string, line []byte) error {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxHistoryBytes+1))
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	lines := bytes.SplitAfter(data, []byte{'\n'})
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	whole := len(data) == 0 || data[len(data)-1] == '\n'
	if whole && len(data) <= maxHistoryBytes && len(lines)+1 < historyTrimAt {
		// One write(2) of one line under O_APPEND.
		if _, err := f.Write(line); err != nil {
			return fmt.Errorf("append history: %w", err)
		}
		return nil
	}
	var kept []parsedLine
	for _, l := range append(lines, line) {
		if h, ok := parseLine(l); ok {
			kept = append(kept, parsedLine{h, bytes.TrimSuffix(l, []byte{'\n'})})
		}
	}
	kept = s.trimHistory(kept, HistoryKeep)
	out := make([]byte, 0, len(data)+len(line))
	for _, l := range kept {
		out = append(append(out, l.raw...), '\n')
	}
	if err := ReplaceFile(p, out, 0o600); err != nil {
		return fmt.Errorf("rewrite history: %w", err)
	}
	return nil
}

// parsedLine is a history line and its bytes (without the newline).
type parsedLine struct {
	HistoryLine
	raw []byte
}

// trimHistory keeps at most keep of lines (oldest first), in order:
// dropped first are the lines naming an operation that is gone (its
// record removed: retention, gensee prune), then the oldest clean or
// uncertain line, and only when every line left is unclean the oldest
// unclean one of an analyzer's class that has a newer one (the oldest of
// all when none has). A line whose operation is there but whose manifest
// is not (yet) stays: another run's manifest may be on its way (its line
// is appended beside its write), and an unclean one must not go first.
func (s Store) trimHistory(lines []parsedLine, keep int) []parsedLine {
	if len(lines) > keep {
		live := lines[:0:0]
		for _, l := range lines {
			if !s.gone(l.OperationID, "") {
				live = append(live, l)
			}
		}
		lines = live
	}
	for len(lines) > keep {
		i := dropIndex(lines)
		lines = slices.Delete(lines, i, i+1)
	}
	return lines
}

// dropIndex is the line trimHistory drops next.
func dropIndex(lines []parsedLine) int {
	if i := slices.IndexFunc(lines, func(l parsedLine) bool { return l.Verdict != spec.HistoryUnclean }); i >= 0 {
		return i
	}
	n := map[string]int{}
	for _, l := range lines {
		n[l.group()]++
	}
	return max(0, slices.IndexFunc(lines, func(l parsedLine) bool { return n[l.group()] > 1 }))
}

// gone reports whether name in operation id's directory ("": the
// directory itself) is known to be gone (retention or gensee prune
// removed the operation).
func (s Store) gone(id, name string) bool {
	dir, err := s.OperationDir(id)
	if err != nil {
		return true
	}
	_, err = os.Lstat(filepath.Join(dir, name))
	return errors.Is(err, os.ErrNotExist)
}

// History returns up to n references to earlier manifests of observation
// digest admitted under analyzer's inferences, each operation once, none
// whose manifest is gone: first the newest unclean run of each class,
// newest first, then the other unclean runs, then the others, each newest
// first. None when the digest has no history. Malformed lines are
// skipped.
func (s Store) History(digest, analyzer string, n int) ([]spec.HistoryRef, error) {
	p, err := s.historyPath(digest)
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
	var lines []HistoryLine // newest first
	raw := bytes.Split(data, []byte{'\n'})
	for i := len(raw) - 1; i >= 0; i-- {
		if h, ok := parseLine(raw[i]); ok && h.Analyzer == analyzer {
			lines = append(lines, h)
		}
	}
	// A line's manifest is looked up once, and only when the line would
	// be named: n lines and the gone ones, not the whole file.
	var out []spec.HistoryRef
	seen, classes := map[string]bool{}, map[string]bool{}
	for pass := range 3 {
		for _, h := range lines {
			unclean := h.Verdict == spec.HistoryUnclean
			if len(out) == n || seen[h.OperationID] || pass < 2 && !unclean || pass == 0 && classes[h.Class] {
				continue
			}
			seen[h.OperationID] = true
			if s.gone(h.OperationID, ManifestFile) {
				continue
			}
			classes[h.Class] = true
			out = append(out, spec.HistoryRef{OperationID: h.OperationID, ManifestSHA256: h.ManifestSHA256})
		}
	}
	return out, nil
}

// parseLine decodes one history line (its newline optional).
func parseLine(line []byte) (HistoryLine, bool) {
	var h HistoryLine
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if len(line) == 0 || spec.DecodeStrict(line, &h, 1024) != nil {
		return h, false
	}
	return h, ValidOperationID(h.OperationID) && spec.IsHex64(h.ManifestSHA256) && h.Analyzer != "" && h.Class != "" && h.Verdict.Valid()
}
