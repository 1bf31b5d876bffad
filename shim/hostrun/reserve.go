package hostrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The command's writes to the staged workspace land in the overlay's upper
// dir in the operation record, with the mounter's (root's) credentials: they
// can fill the state dir's file system, root's reserved blocks included,
// and nothing would then hold the manifest. So space for the exit path's
// records is taken before the go, as a file the exit path removes right
// before it writes them. The writes themselves stay bounded only by that
// file system (no quota; the manifest's not_enforced says so).
const (
	reserveFile = "reserve"
	reserveSize = 4 << 20 // the records of a run are tens of KiB; the rest is slack
)

// reserveSpace allocates reserveSize bytes in dir (fallocate, else zeros
// written), so that releaseSpace gives them back to the exit path.
func reserveSpace(dir string) (retErr error) {
	p := filepath.Join(dir, reserveFile)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create the exit path's reserve: %w", err)
	}
	defer func() {
		f.Close()
		if retErr != nil {
			os.Remove(p)
		}
	}()
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveSize)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = writeZeros(f, reserveSize)
	}
	if err != nil {
		return fmt.Errorf("reserve %d MiB in %s for the run's records: %w", reserveSize>>20, dir, err)
	}
	return nil
}

func writeZeros(f *os.File, n int) error {
	buf := make([]byte, 64<<10)
	for ; n > 0; n -= len(buf) {
		if _, err := f.Write(buf[:min(n, len(buf))]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// releaseSpace removes the reserve and, when the file system has less
// room than the reserve besides it (the command filled it), commits the
// file system, so that the reserve's blocks are free for the records (ext4
// reuses a freed data block only once the journal has committed the
// free). With room to spare the records need none of the reserve's blocks
// and nothing is committed: syncfs writes back every dirty page of the
// file system, tens of milliseconds under another workload's writes; and
// the removal itself (which may wait for a discard of the freed blocks)
// goes beside the records' writes: wait, which Release calls, reports it.
func releaseSpace(dir string) (wait func() error) {
	p := filepath.Join(dir, reserveFile)
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) == nil && fs.Bavail*uint64(fs.Bsize) >= reserveSize {
		done := make(chan error, 1)
		go func() { done <- removeReserve(p) }()
		return func() error { return <-done }
	}
	err := removeReserve(p)
	if err == nil {
		if d, oerr := os.Open(dir); oerr == nil {
			unix.Syncfs(int(d.Fd()))
			d.Close()
		}
	}
	return func() error { return err }
}

func removeReserve(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release the exit path's reserve: %w", err)
	}
	return nil
}
