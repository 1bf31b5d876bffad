package hostrun

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/asuser"
)

// dirID identifies a directory: the wrapper mounts the workspace only if
// the directory it opens is the one checked here.
type dirID struct{ Dev, Ino uint64 }

// CheckWorkspace refuses a workspace that is not a plain directory reached
// without symlinks, and returns the directory it opened once
// (O_NOFOLLOW, as the user) and checked, with its identity: the wrapper mounts
// the workspace only if the directory it opens is that one, and the gate
// reads that directory (through the fd) as the lower layer, whatever the
// path names by then. Whether its file system can be an overlay lower
// layer is the kernel's answer to the wrapper's mount, which refuses the
// run before the command starts. The caller closes the file.
//
// The directory is opened with the credentials the command runs with (the
// user's uid, its primary group only): a workspace the user could not
// reach (an ancestor it cannot search) or list is refused, so the run
// never shows the user a tree only root could open.
func CheckWorkspace(ws string, id Identity) (*Workspace, *Refusal) {
	if rf := checkWorkspace(ws); rf != nil {
		return nil, rf
	}
	fd := -1
	err := asuser.Do(asuser.Creds{UID: id.UID, GID: id.GID, Groups: []uint32{id.GID}}, func() error {
		var err error
		fd, err = unix.Open(ws, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return nil, refuse(ReasonWorkspace, "--workspace", "pass a directory the invoking user can reach and list", "uid %d cannot open %s: %v", id.UID, ws, err)
		}
		return nil, refuse(ReasonWorkspace, "--workspace", "pass an existing directory", "open %s: %v", ws, err)
	}
	f := os.NewFile(uintptr(fd), ws)
	var st, lst unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, refuse(ReasonWorkspace, "--workspace", "", "stat %s: %v", ws, err)
	}
	if err := unix.Lstat(ws, &lst); err != nil || lst.Dev != st.Dev || lst.Ino != st.Ino {
		f.Close()
		return nil, refuse(ReasonWorkspace, "--workspace", "leave the workspace in place while the run starts", "%s changed while it was checked", ws)
	}
	return &Workspace{Dir: f, ID: dirID{Dev: st.Dev, Ino: st.Ino}, Stat: st}, nil
}

// Workspace is the workspace directory as checked: an fd of it,
// its identity and its attributes then.
type Workspace struct {
	Dir  *os.File
	ID   dirID
	Stat unix.Stat_t
}

// FDPath names the checked directory through this process's fd (what the
// gate reads as the overlay's lower layer). The trailing "/." makes the fd
// link a directory step, so callers that refuse a final symlink
// (O_NOFOLLOW) still open it.
func (w *Workspace) FDPath() string { return "/proc/self/fd/" + strconv.Itoa(int(w.Dir.Fd())) + "/." }

func (w *Workspace) Close() error { return w.Dir.Close() }

func checkWorkspace(ws string) *Refusal {
	const field = "--workspace"
	fi, err := os.Lstat(ws)
	switch {
	case err != nil:
		return refuse(ReasonWorkspace, field, "pass an existing directory", "%v", err)
	case fi.Mode()&os.ModeSymlink != 0:
		return refuse(ReasonWorkspace, field, "pass the directory the symlink points to", "%s is a symlink", ws)
	case !fi.IsDir():
		return refuse(ReasonWorkspace, field, "pass a directory", "%s is not a directory (%s)", ws, fi.Mode().Type())
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return refuse(ReasonWorkspace, field, "pass an existing directory", "%v", err)
	}
	if real != ws {
		return refuse(ReasonWorkspace, field, "pass "+real+", the path without symlinks", "%s is reached through a symlink (it is %s)", ws, real)
	}
	return nil
}
