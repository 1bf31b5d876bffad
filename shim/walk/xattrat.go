package walk

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// atXattrs reads the xattrs of name below dirfd with listxattrat(2) and
// getxattrat(2) (Linux 6.13) and AT_SYMLINK_NOFOLLOW: one component, never
// followed, like fstatat. golang.org/x/sys has the syscall numbers but no
// wrappers yet. Older kernels answer ENOSYS (readBounded: ErrNoXattrAt).
func atXattrs(dirfd int, name string) xattrIO {
	return xattrIO{
		list: func(buf []byte) (int, error) {
			p, err := unix.BytePtrFromString(name)
			if err != nil {
				return 0, err
			}
			r, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
				unix.AT_SYMLINK_NOFOLLOW, uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), 0)
			runtime.KeepAlive(p)
			runtime.KeepAlive(buf)
			if e != 0 {
				return 0, e
			}
			return int(r), nil
		},
		get: func(attr string, buf []byte) (int, error) {
			p, err := unix.BytePtrFromString(name)
			if err != nil {
				return 0, err
			}
			a, err := unix.BytePtrFromString(attr)
			if err != nil {
				return 0, err
			}
			// struct xattr_args { __aligned_u64 value; __u32 size; __u32 flags; }
			args := struct {
				value uint64
				size  uint32
				flags uint32
			}{uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))), uint32(len(buf)), 0}
			r, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
				unix.AT_SYMLINK_NOFOLLOW, uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
			runtime.KeepAlive(p)
			runtime.KeepAlive(a)
			runtime.KeepAlive(buf)
			if e != 0 {
				return 0, e
			}
			return int(r), nil
		},
	}
}
