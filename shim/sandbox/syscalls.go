package sandbox

import "golang.org/x/sys/unix"

// sysnum numbers every syscall the host filter names, on the architecture it
// is built for (amd64 and arm64 share these names; their numbers differ).
var sysnum = map[string]uint32{
	"add_key":           unix.SYS_ADD_KEY,
	"bpf":               unix.SYS_BPF,
	"clone":             unix.SYS_CLONE,
	"clone3":            unix.SYS_CLONE3,
	"delete_module":     unix.SYS_DELETE_MODULE,
	"finit_module":      unix.SYS_FINIT_MODULE,
	"fsconfig":          unix.SYS_FSCONFIG,
	"fsmount":           unix.SYS_FSMOUNT,
	"fsopen":            unix.SYS_FSOPEN,
	"fspick":            unix.SYS_FSPICK,
	"init_module":       unix.SYS_INIT_MODULE,
	"io_uring_enter":    unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
	"io_uring_setup":    unix.SYS_IO_URING_SETUP,
	"ioctl":             unix.SYS_IOCTL,
	"kexec_file_load":   unix.SYS_KEXEC_FILE_LOAD,
	"kexec_load":        unix.SYS_KEXEC_LOAD,
	"keyctl":            unix.SYS_KEYCTL,
	"mount":             unix.SYS_MOUNT,
	"mount_setattr":     unix.SYS_MOUNT_SETATTR,
	"move_mount":        unix.SYS_MOVE_MOUNT,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"open_tree":         unix.SYS_OPEN_TREE,
	"open_tree_attr":    unix.SYS_OPEN_TREE_ATTR,
	"perf_event_open":   unix.SYS_PERF_EVENT_OPEN,
	"personality":       unix.SYS_PERSONALITY,
	"pivot_root":        unix.SYS_PIVOT_ROOT,
	"request_key":       unix.SYS_REQUEST_KEY,
	"setns":             unix.SYS_SETNS,
	"socket":            unix.SYS_SOCKET,
	"socketpair":        unix.SYS_SOCKETPAIR,
	"umount2":           unix.SYS_UMOUNT2,
	"unshare":           unix.SYS_UNSHARE,
	"userfaultfd":       unix.SYS_USERFAULTFD,
}

// compatOnly are syscalls that exist only in a 32-bit ABI, which the filter
// kills by its architecture check: a refused-syscall list may name them and
// they need no rule here.
var compatOnly = []string{"socketcall"}
