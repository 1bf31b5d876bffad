package gate

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/gensee/gensee/internal/fsafe"
	"golang.org/x/sys/unix"
)

// stager writes into the runtime-owned staging directory. The directory is
// not container-controlled, but every write still goes through dirfds with
// O_EXCL|O_NOFOLLOW so a stale or unexpected entry is an error, never
// overwritten or followed. It is created with the first product staged: a
// gate that stages nothing leaves no directory to make durable.
type stager struct {
	dir string
	fd  int // -1 until the first product is staged
}

func newStager(dir string) *stager { return &stager{dir: dir, fd: -1} }

// open creates (0700) and opens the staging directory, once.
func (s *stager) open() error {
	if s.fd >= 0 {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create staging directory: %w", err)
	}
	fd, err := fsafe.OpenDirAt(unix.AT_FDCWD, s.dir)
	if err != nil {
		return fmt.Errorf("open staging directory: %w", err)
	}
	s.fd = fd
	return nil
}

func (s *stager) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// path is the staged location of a slot.
func (s *stager) path(slot string) string { return filepath.Join(s.dir, filepath.FromSlash(slot)) }

// parentOf creates the parent directories of slot (existing ones are fine:
// two slots may share them) and returns an fd for the innermost one.
func (s *stager) parentOf(slot string) (int, error) {
	if err := s.open(); err != nil {
		return -1, fmt.Errorf("stage %s: %w", slot, err)
	}
	w := fsafe.Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY, Mkdir: 0o755}
	fd, err := w.Open(s.fd, path.Dir(slot)) // "." (a top-level slot): a dup of the staging dir
	if err != nil {
		return -1, fmt.Errorf("stage %s: %w", slot, err)
	}
	return fd, nil
}

// mkdir creates a new directory below dirfd and opens it.
func mkdir(dirfd int, name string) (int, error) {
	if err := unix.Mkdirat(dirfd, name, 0o755); err != nil {
		return -1, fmt.Errorf("stage mkdir %s: %w", name, err)
	}
	fd, err := fsafe.OpenDirAt(dirfd, name)
	if err != nil {
		return -1, fmt.Errorf("open staged directory: %w", err)
	}
	return fd, nil
}

// stagedFile is a staged file being written: a bare fd (no os.File
// finalizer or poller registration per file; trees stage many).
type stagedFile struct {
	fd     int
	name   string
	off    int64
	direct bool // O_DIRECT is on: aligned writes bypass the page cache
	holdP  bool // direct writes keep the writer's P (writeHoldingP)
}

// dioAlign is the buffer, length and offset alignment used for O_DIRECT; 4 KiB
// satisfies the logical block sizes of the filesystems a state directory
// lives on. A write the filesystem still refuses (EINVAL) is retried
// buffered.
const dioAlign = 4096

// setDirect turns on O_DIRECT for a large staged copy: its bytes go to disk
// from the copy buffers without a second copy into the page cache (which
// on these VMs costs more than hashing: every new page cache page is fresh
// guest memory). Reports whether it is on.
func (f *stagedFile) setDirect() bool {
	fl, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	if _, err := unix.FcntlInt(uintptr(f.fd), unix.F_SETFL, fl|unix.O_DIRECT); err != nil {
		return false
	}
	f.direct = true
	f.holdP = runtime.GOMAXPROCS(0) > 1
	return true
}

func (f *stagedFile) clearDirect() error {
	fl, err := unix.FcntlInt(uintptr(f.fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(f.fd), unix.F_SETFL, fl&^unix.O_DIRECT)
	}
	if err != nil {
		return fmt.Errorf("staged %s: clear O_DIRECT: %w", f.name, err)
	}
	f.direct = false
	return nil
}

// Write writes all of p. With O_DIRECT on, the aligned prefix goes direct
// and an unaligned tail (the end of the file) switches the file back to
// buffered writes.
func (f *stagedFile) Write(p []byte) (int, error) {
	n := 0
	if f.direct {
		if aligned := len(p) &^ (dioAlign - 1); aligned > 0 && f.off%dioAlign == 0 {
			m, err := f.write(p[:aligned])
			n += m
			if err != nil && !errors.Is(err, unix.EINVAL) {
				return n, err
			}
		}
		if n < len(p) {
			if err := f.clearDirect(); err != nil {
				return n, err
			}
		}
	}
	m, err := f.write(p[n:])
	return n + m, err
}

func (f *stagedFile) write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := fsafe.RetryEINTR(func() (int, error) {
			if f.direct && f.holdP {
				return writeHoldingP(f.fd, p[n:])
			}
			return unix.Write(f.fd, p[n:])
		})
		if err != nil {
			return n, fmt.Errorf("write staged %s: %w", f.name, err)
		}
		n += m
		f.off += int64(m)
	}
	return n, nil
}

// writeHoldingP is write(2) as a raw system call: the goroutine keeps its
// P (its slot to run Go code) while the device works. A direct write of a
// pipelined chunk blocks for about a millisecond; through unix.Write that
// outlives the runtime's 20 µs syscall tick, so sysmon takes the P back and
// hands it to a newly woken spinning thread, keeps polling every 20 µs, and
// the writer must win a P back when the write returns. On the 2-vCPU VMs
// that churn preempted the hashing goroutine some 4,000 times per GiB and
// made a 1 GiB gate ~10% slower than with the P held (P3). Only with
// GOMAXPROCS > 1 (setDirect), so the hashing goroutine has a P of its own:
// with one P, holding it would stop the hash for every write.
func writeHoldingP(fd int, p []byte) (int, error) {
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func (f *stagedFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return fmt.Errorf("close staged %s: %w", f.name, err)
	}
	return nil
}

// create makes a new staged file with the given permission bits.
func create(dirfd int, name string, perm uint32) (*stagedFile, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, fmt.Errorf("stage create %s: %w", name, err)
	}
	if err := unix.Fchmod(fd, perm); err != nil { // umask may have cut bits
		unix.Close(fd)
		return nil, fmt.Errorf("stage chmod %s: %w", name, err)
	}
	return &stagedFile{fd: fd, name: name}, nil
}

// remove deletes a failed product's staged output and any parent
// directories it left empty.
func (s *stager) remove(slot string) error {
	if err := os.RemoveAll(s.path(slot)); err != nil {
		return fmt.Errorf("remove staged %s: %w", slot, err)
	}
	for dir := path.Dir(slot); dir != "."; dir = path.Dir(dir) {
		if os.Remove(s.path(dir)) != nil {
			break // not empty: another product lives there
		}
	}
	return nil
}
