package verifier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// ErrStagedMismatch: a staged copy no longer hashes to its manifest record.
var ErrStagedMismatch = errors.New("the staged copy does not match the manifest")

// Find returns manifest m's record of the product at slot, which must
// have passed the gate, be staged, and be of class.
func Find(m *spec.Manifest, slot, class string) (*spec.ProductRecord, error) {
	for i := range m.Products {
		pr := &m.Products[i]
		if pr.Slot != slot {
			continue
		}
		switch {
		case pr.Class != class:
			return nil, fmt.Errorf("product %q is a %s; this verifier judges %s", slot, pr.Class, class)
		case pr.Verdict != spec.VerdictPass || pr.Staged == "" || pr.SHA256 == "":
			return nil, fmt.Errorf("product %q failed the gate (verdict %s) and was not staged", slot, pr.Verdict)
		}
		return pr, nil
	}
	return nil, fmt.Errorf("operation %s has no product at slot %q", m.OperationID, slot)
}

// Read reads the staged copy of the single-file product pr below
// operation directory opDir: every component opened without following a
// symlink, a regular file only, at most pr.Bytes bytes, and only if they
// hash to the record's sha256 (the receipt binds the verdict to that
// digest, so the bytes judged must be the ones it names).
func Read(opDir string, pr *spec.ProductRecord) ([]byte, error) {
	od, err := fsafe.OpenDirAt(unix.AT_FDCWD, opDir)
	if err != nil {
		return nil, fmt.Errorf("open operation directory: %w", err)
	}
	defer unix.Close(od)
	dir, err := fsafe.Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY}.Open(od, path.Dir(pr.Staged))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", pr.Staged, err)
	}
	defer unix.Close(dir)
	b, err := fsafe.ReadFileAt(dir, path.Base(pr.Staged), pr.Bytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", pr.Staged, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != pr.SHA256 || int64(len(b)) != pr.Bytes {
		return nil, fmt.Errorf("%w: %s has sha256 %s (%d bytes), the manifest records %s (%d bytes)", ErrStagedMismatch, pr.Staged, got, len(b), pr.SHA256, pr.Bytes)
	}
	return bytes.Clone(b), nil
}
