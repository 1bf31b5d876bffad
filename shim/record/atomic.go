package record

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path through a temp file in the same
// directory: write, fsync, rename, fsync the directory. Readers see the old
// file or the new one, never a torn write.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return writeFile(path, bytes.NewReader(data), mode, true)
}

// ReplaceFile is WriteFileAtomic without the fsyncs: readers still see the
// old file or the new one, but a crash of the machine may lose it. Only for
// files whose meaning ends at reboot anyway — the bundle's (containerd's
// state dir, /run), whose netns and table die with the machine — or whose
// loss only keeps a record longer (the cleaned marker). Each fsync costs a
// journal commit (~1-2 ms) on the container's start or delete path.
func ReplaceFile(path string, data []byte, mode os.FileMode) error {
	return writeFile(path, bytes.NewReader(data), mode, false)
}

// writeFile writes what r yields to a temporary file beside path and renames
// it over path; durable fsyncs the file and then the directory.
func writeFile(path string, r io.Reader, mode os.FileMode, durable bool) (retErr error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir fsyncs directory dir, making a rename or remove in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
