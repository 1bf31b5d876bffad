package asuser

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// Creds are the file-system credentials files are opened with.
type Creds struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups; GID need not be among them
}

// Lookup is the credentials of account uid (primary group gid, login name
// name, "" when the password database has none): its groups from the group
// database, else gid alone.
func Lookup(uid, gid uint32, name string) Creds {
	c := Creds{UID: uid, GID: gid, Groups: []uint32{gid}}
	if name == "" {
		return c
	}
	u, err := user.Lookup(name)
	if err != nil {
		return c
	}
	ids, err := u.GroupIds()
	if err != nil {
		return c
	}
	for _, s := range ids {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(n) != gid {
			c.Groups = append(c.Groups, uint32(n))
		}
	}
	return c
}

// ErrCreds is a failure to take on, or give back, the credentials.
var ErrCreds = errors.New("switch file-system credentials")

// Do runs fn on an OS thread whose fsuid, fsgid and supplementary groups
// are c's. fn must not start goroutines that touch files for c: only its
// own thread has c's credentials. A process that is not root cannot
// switch: it runs fn as itself when c is its own uid, else fails.
func Do(c Creds, fn func() error) error {
	if euid := unix.Geteuid(); euid != 0 {
		if uint32(euid) != c.UID {
			return fmt.Errorf("%w: uid %d cannot act as uid %d", ErrCreds, euid, c.UID)
		}
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := onThread(c, fn)
		if restored {
			runtime.UnlockOSThread()
		} // else: exiting locked ends the thread with the user's credentials
		errc <- err
	}()
	return <-errc
}

// onThread switches the locked thread to c, runs fn and switches back.
// restored is false only when the thread may still hold c's credentials.
func onThread(c Creds, fn func() error) (restored bool, err error) {
	saved, err := unix.Getgroups()
	if err != nil {
		return true, fmt.Errorf("%w: getgroups: %w", ErrCreds, err)
	}
	fsuid, _ := unix.SetfsuidRetUid(-1) // -1 changes nothing and returns the current value
	fsgid, _ := unix.SetfsgidRetGid(-1)
	defer func() {
		// fsuid first: back at 0 the thread has its file capabilities again.
		rerr := errors.Join(setFsuid(fsuid), setFsgid(fsgid), unix.Setgroups(saved))
		restored = rerr == nil
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("%w: restore: %w", ErrCreds, rerr))
		}
	}()
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return false, fmt.Errorf("%w: setgroups: %w", ErrCreds, err)
	}
	if err := setFsgid(int(c.GID)); err != nil {
		return false, err
	}
	if err := setFsuid(int(c.UID)); err != nil {
		return false, err
	}
	return false, fn()
}

// setFsuid sets the thread's fsuid and reads it back (setfsuid reports
// failure only by leaving the value unchanged).
func setFsuid(uid int) error {
	unix.SetfsuidRetUid(uid)
	if got, _ := unix.SetfsuidRetUid(-1); got != uid {
		return fmt.Errorf("%w: fsuid is %d, want %d", ErrCreds, got, uid)
	}
	return nil
}

func setFsgid(gid int) error {
	unix.SetfsgidRetGid(gid)
	if got, _ := unix.SetfsgidRetGid(-1); got != gid {
		return fmt.Errorf("%w: fsgid is %d, want %d", ErrCreds, got, gid)
	}
	return nil
}

// ReadFile reads path as c: a regular file (fstat of the fd), the last
// component no symlink, at most limit bytes (fsafe's errors: ELOOP in an
// *os.PathError, *fsafe.NotRegularError, *fsafe.TooLargeError). Errors
// name the path, never the file's content.
func ReadFile(c Creds, path string, limit int64) ([]byte, error) {
	var f *os.File
	var st *unix.Stat_t
	if err := Do(c, func() (err error) { f, st, err = fsafe.OpenFile(path); return err }); err != nil {
		return nil, err
	}
	defer f.Close()
	return fsafe.ReadAll(f, st, limit)
}

// WriteFlags open an output in place: created if absent (mode perm less
// the umask), truncated if present and writable, never through a symlink
// at the last component, never waiting for a fifo's reader.
const WriteFlags = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// WriteFile writes data to path as c, in place (no temporary file, no
// rename): only a regular file by fstat of the opened fd is written.
func WriteFile(c Creds, path string, data []byte, perm os.FileMode) (retErr error) {
	var f *os.File
	err := Do(c, func() error {
		fd, err := fsafe.RetryEINTR(func() (int, error) { return unix.Open(path, WriteFlags, uint32(perm.Perm())) })
		if err != nil {
			return &os.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "fstat", Path: path, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return &fsafe.NotRegularError{Path: path, Mode: st.Mode}
		}
		f = os.NewFile(uintptr(fd), path)
		return nil
	})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); retErr == nil && cerr != nil {
			retErr = cerr
		}
	}()
	_, err = f.Write(data) // loops until all is written or it fails
	return err
}
