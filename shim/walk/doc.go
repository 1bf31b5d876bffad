// Package walk owns the fd-based traversal of a container's rootfs diff: an
// overlay upperdir (with its image layers beside it) or a plain directory
// (a bind-mounted single-layer rootfs).
//
// Invariants:
//   - Nothing here resolves a multi-component path or follows a symlink. Every
//     object is reached from a pinned directory fd, one component at a time,
//     with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV) and O_NOFOLLOW.
//   - Each entry is fstatat(AT_SYMLINK_NOFOLLOW)'d before anything else; only
//     directories and regular files are ever opened, and an opened fd must
//     match the stat (same inode, device and type) or the entry is reported
//     as changed. FIFOs, sockets and devices are never opened.
//   - Overlay markers are read only in the mount's own xattr namespace;
//     markers in the other namespace, metacopy, redirect and xwhiteouts are
//     reported as Marks, never interpreted.
//   - Extended attributes compared with the image (Entry.Xattrs,
//     ImageXattrs) are read through the opened fd of a directory or regular
//     file, and for anything else by one name below the pinned parent fd
//     with listxattrat/getxattrat(AT_SYMLINK_NOFOLLOW), never a path; every
//     list and value is size-checked against MaxXattrList, MaxXattrValue and
//     MaxXattrBytes before it is read. The mount's own overlay xattrs are
//     left out of them (visibleXattr).
//
// The package reports what it saw; deciding what a change or a violation is
// belongs to package gate. It never writes.
package walk
