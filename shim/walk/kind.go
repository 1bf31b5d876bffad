package walk

import (
	"time"

	"golang.org/x/sys/unix"
)

// Kind is the type of a directory entry as the gate cares about it.
type Kind uint8

// Entry kinds. KindWhiteout is a 0/0 character device inside an overlay
// layer; outside overlay mode such a device is KindChar.
const (
	KindUnknown Kind = iota
	KindDir
	KindFile
	KindSymlink
	KindWhiteout
	KindChar
	KindBlock
	KindFifo
	KindSocket
)

var kindNames = [...]string{"unknown", "dir", "file", "symlink", "whiteout", "char", "block", "fifo", "socket"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Special reports whether k is an object the gate never opens or stages.
func (k Kind) Special() bool {
	return k == KindChar || k == KindBlock || k == KindFifo || k == KindSocket || k == KindUnknown
}

// Stat is the part of struct stat the gate uses.
type Stat struct {
	Mode  uint32 // full st_mode, type bits included
	Size  int64
	Nlink uint64
	Uid   uint32
	Gid   uint32
	Ino   uint64
	Dev   uint64
	Rdev  uint64
	Mtime time.Time
	Ctime time.Time
}

// Perm returns the permission bits including setuid, setgid and sticky.
func (s Stat) Perm() uint32 { return s.Mode & 0o7777 }

func statOf(st *unix.Stat_t) Stat {
	return Stat{
		Mode:  st.Mode,
		Size:  st.Size,
		Nlink: uint64(st.Nlink),
		Uid:   st.Uid,
		Gid:   st.Gid,
		Ino:   st.Ino,
		Dev:   uint64(st.Dev),
		Rdev:  uint64(st.Rdev),
		Mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		Ctime: time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
	}
}

// kindOf classifies a stat. In an overlay layer a 0/0 character device is a
// whiteout, the only whiteout form overlayfs itself creates.
func kindOf(st *unix.Stat_t, overlay bool) Kind {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return KindDir
	case unix.S_IFREG:
		return KindFile
	case unix.S_IFLNK:
		return KindSymlink
	case unix.S_IFCHR:
		if overlay && st.Rdev == 0 {
			return KindWhiteout
		}
		return KindChar
	case unix.S_IFBLK:
		return KindBlock
	case unix.S_IFIFO:
		return KindFifo
	case unix.S_IFSOCK:
		return KindSocket
	}
	return KindUnknown
}
