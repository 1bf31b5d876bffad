package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gensee/gensee/internal/fsafe"
)

// SyncFileLimit is the most staged objects SyncStaged fsyncs one by one;
// above it one syncfs(2) of the staging file system is cheaper. Measured on
// the 2-vCPU ext4 VMs: a 1 GiB blob (written O_DIRECT) costs 3 ms by fsync
// and 10-20 ms by syncfs; a 100,000-file directory_tree 11-14 s by fsync
// (a journal commit each, about 120 us) and 0.1-1.3 s by syncfs. Below the
// limit fsync costs at most ~30 ms and, unlike syncfs, never waits on other
// writers of the same file system.
const SyncFileLimit = 256

// syncer is the durability seam: fsafe's tree fsync and syncfs, faked in
// tests.
type syncer struct {
	tree func(dir string) error // fsync every file and directory, then dir's parent
	fs   func(dir string) error // syncfs(2) of the file system holding dir
}

var realSyncer = syncer{tree: fsafe.SyncTree, fs: fsafe.SyncFS}

// SyncStaged makes what Run staged under dir (Input.StagingDir) durable,
// before a manifest that names it is written: every staged file and
// directory, and dir's own entry in its parent. res is Run's result; its
// entry count picks fsync of each object (at most SyncFileLimit) or one
// syncfs of the staging file system. On failure the staged copies are not
// durable: SyncStaged removes dir, as Run removes what it staged when it
// fails, and the caller records the gate as failed with the error. When
// nothing was staged and Run made no directory, there is nothing to sync;
// a directory a failed product was removed from is synced as ever.
func SyncStaged(dir string, res *Result) error { return syncStaged(dir, res, realSyncer) }

func syncStaged(dir string, res *Result, s syncer) error {
	n := stagedObjects(res)
	if _, err := os.Lstat(dir); n == 0 && errors.Is(err, fs.ErrNotExist) {
		return nil // nothing staged and no directory made (stager)
	}
	sync := s.tree
	if n > SyncFileLimit {
		sync = s.fs
	}
	if err := sync(dir); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("gate: make the staged products durable: %w", err)
	}
	return nil
}

// stagedObjects bounds from above how many objects res staged: one per
// single-file product, one per entry of a tree (a patch counts its lines).
func stagedObjects(res *Result) int {
	n := 0
	if res == nil {
		return n
	}
	for _, p := range res.Products {
		if p.Staged != "" {
			n += max(1, len(p.Entries))
		}
	}
	return n
}
