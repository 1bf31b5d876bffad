package fsafe

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// MaxRetries bounds how many times one call is retried on EINTR (and, for
// openat2, EAGAIN). A call still interrupted after that many tries returns
// its last error; callers treat it like any other failure.
const MaxRetries = 16

// RetryEINTR calls fn until it returns an error other than EINTR, at most
// MaxRetries times.
func RetryEINTR[T any](fn func() (T, error)) (T, error) {
	return retry(fn, unix.EINTR)
}

// retry calls fn until its error is none of again, at most MaxRetries times.
func retry[T any](fn func() (T, error), again ...unix.Errno) (T, error) {
	var (
		v   T
		err error
	)
	for range MaxRetries {
		v, err = fn()
		if !isAny(err, again) {
			return v, err
		}
	}
	return v, err
}

func isAny(err error, errnos []unix.Errno) bool {
	if err == nil {
		return false
	}
	for _, e := range errnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Resolve sets for Openat2.
const (
	// ResolveConfined keeps a lookup below dirfd and follows nothing: no
	// symlink anywhere, no /proc magic link, no crossing into another
	// mount. For trees a container wrote (the product gate's walk).
	ResolveConfined = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
		unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

	// ResolveInRoot treats dirfd as a root: absolute symlinks and ".."
	// resolve against it, as they would for a process chrooted there, and
	// /proc magic links are refused. For resolving what a container would
	// see at a path (its executable, a bind destination).
	ResolveInRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
)

// Openat2 opens path below dirfd with openat2(2), flags|O_CLOEXEC and the
// resolve set, retrying EINTR and EAGAIN (RESOLVE_BENEATH and
// RESOLVE_IN_ROOT answer EAGAIN when a rename elsewhere may have raced the
// lookup) at most MaxRetries times. The error is openat2's bare errno
// (ELOOP for a refused symlink, EXDEV for an escape or a mount crossing,
// ENOSYS before Linux 5.6), for callers to classify and wrap.
func Openat2(dirfd int, path string, flags, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolve}
	return retry(func() (int, error) { return unix.Openat2(dirfd, path, &how) }, unix.EINTR, unix.EAGAIN)
}

// OpenInRoot opens p inside root with Openat2 and ResolveInRoot. A failure
// is an *os.PathError whose Op names the resolution.
func OpenInRoot(root *os.File, p string, flags uint64) (*os.File, error) {
	fd, err := Openat2(int(root.Fd()), p, flags, ResolveInRoot)
	if err != nil {
		return nil, &os.PathError{Op: "openat2 RESOLVE_IN_ROOT", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}
