package record

import (
	"bytes"
	"os"

	"github.com/gensee/gensee/internal/fsafe"
)

// WriteFileAtomic writes data to path through a temp file in the same
// directory: write, fsync, rename, fsync the directory (fsafe.WriteFile,
// Durable). Readers see the old file or the new one, never a torn write.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return fsafe.WriteFile(path, bytes.NewReader(data), mode, fsafe.Durable)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: readers still see the
// old file or the new one, but a crash of the machine may lose it. Only for
// files whose meaning ends at reboot anyway — the bundle's (containerd's
// state dir, /run), whose netns and table die with the machine — or whose
// loss only keeps a record longer (the cleaned marker). Each fsync costs a
// journal commit (~1-2 ms) on the container's start or delete path.
func ReplaceFile(path string, data []byte, mode os.FileMode) error {
	return fsafe.WriteFile(path, bytes.NewReader(data), mode, fsafe.NotDurable)
}

// SyncDir fsyncs directory dir, making a rename or remove in it durable.
func SyncDir(dir string) error { return fsafe.SyncDir(dir) }
