package cli

import (
	"bytes"
	"errors"
	"io"
	"os"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// stdio is the path that means stdin (for inputs) or stdout (for outputs).
const stdio = "-"

// readInput reads an operator-named file, or stdin for "-". A file is
// opened like every read here (fsafe: a regular file only, never waiting
// on a fifo) except that a symlink the operator named is followed, and is
// refused when larger than max; stdin is read to at most max+1 bytes so
// the document's parser reports an oversize input as too large instead of
// seeing a truncated one.
func (e *Env) readInput(path string, max int) ([]byte, error) {
	if path == stdio {
		return io.ReadAll(io.LimitReader(e.Stdin, int64(max)+1))
	}
	f, st, err := fsafe.OpenFileFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fsafe.ReadAll(f, st, int64(max))
}

// readErr is the failure for an input that could not be read: exit 2, or
// exit 1 (refused, as its parser would) for one larger than any valid
// document of its kind.
func readErr(what, path string, err error) error {
	if errors.Is(err, fsafe.ErrTooLarge) {
		return fail(ExitRefused, what+" "+path+" is invalid", err, "name the "+what+" itself: this file is larger than any valid one")
	}
	return fail(ExitUsage, "read "+what+" "+path, unwrapPath(err), "check the path and permissions")
}

// unwrapPath drops the *PathError wrapper whose path the message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeNew creates path with exactly perm and data, refusing to replace
// anything that exists (including a symlink). On failure it removes what it
// created.
func writeNew(path string, data []byte, perm os.FileMode) (retErr error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); retErr == nil && cerr != nil {
			retErr = cerr
		}
		if retErr != nil {
			os.Remove(path)
		}
	}()
	if err := f.Chmod(perm); err != nil { // the umask may have narrowed it
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// writeOutput writes data to stdout for "-", else replaces path atomically
// and durably with mode perm (fsafe.WriteFile), so a reader never sees half
// a document.
func (e *Env) writeOutput(path string, data []byte, perm os.FileMode) error {
	if path == stdio {
		_, err := e.Stdout.Write(data)
		return err
	}
	return fsafe.WriteFile(path, bytes.NewReader(data), perm, fsafe.Durable)
}

// writeErr is the failure for an output that could not be written (exit 2).
func writeErr(what, path string, err error) error {
	return fail(ExitUsage, "write "+what+" "+path, unwrapPath(err), "check the directory exists and is writable")
}

// sameFile reports whether a and b name the same existing file.
func sameFile(a, b string) bool {
	if a == stdio || b == stdio {
		return false
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
