package sandbox

import "golang.org/x/sys/unix"

// right is one Landlock access right or scope: its bit, the name Applied
// reports (the constant's name, lower case, without its prefix) and the ABI
// that brought it.
type right struct {
	bit  uint64
	name string
	abi  int
}

// fsRights are the filesystem rights a Restrict handles, in ABI order. Rights
// of ABIs after 7 are not used: their meaning has not been checked here.
var fsRights = []right{
	{unix.LANDLOCK_ACCESS_FS_EXECUTE, "execute", 1},
	{unix.LANDLOCK_ACCESS_FS_WRITE_FILE, "write_file", 1},
	{unix.LANDLOCK_ACCESS_FS_READ_FILE, "read_file", 1},
	{unix.LANDLOCK_ACCESS_FS_READ_DIR, "read_dir", 1},
	{unix.LANDLOCK_ACCESS_FS_REMOVE_DIR, "remove_dir", 1},
	{unix.LANDLOCK_ACCESS_FS_REMOVE_FILE, "remove_file", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_CHAR, "make_char", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_DIR, "make_dir", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_REG, "make_reg", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_SOCK, "make_sock", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_FIFO, "make_fifo", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK, "make_block", 1},
	{unix.LANDLOCK_ACCESS_FS_MAKE_SYM, "make_sym", 1},
	{unix.LANDLOCK_ACCESS_FS_REFER, "refer", 2},
	{unix.LANDLOCK_ACCESS_FS_TRUNCATE, "truncate", 3},
	{unix.LANDLOCK_ACCESS_FS_IOCTL_DEV, "ioctl_dev", 5},
}

var (
	netBindTCP    = right{unix.LANDLOCK_ACCESS_NET_BIND_TCP, "bind_tcp", 4}
	netConnectTCP = right{unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, "connect_tcp", 4}
	scopeAbstract = right{unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, "abstract_unix_socket", 6}
	scopeSignal   = right{unix.LANDLOCK_SCOPE_SIGNAL, "signal", 6}
)

// Rights by what a rule grants. A rule on a non-directory may carry only
// fileRights (the kernel's LANDLOCK_ACCESS_FILE).
const (
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR

	// writeTreeRights is everything but device nodes and device ioctls.
	writeTreeRights = readRights | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE

	writeFileRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// Kernel ABI pieces x/sys does not define.
const (
	ruleNetPort = 2 // LANDLOCK_RULE_NET_PORT
)

// rulesetAttr is struct landlock_ruleset_attr up to ABI 7 (24 bytes). x/sys's
// type carries later fields; a kernel takes a shorter struct, and a longer
// one only with those fields zero.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// netPortAttr is struct landlock_net_port_attr (packed, 16 bytes).
type netPortAttr struct {
	allowed, port uint64
}
