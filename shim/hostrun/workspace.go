package hostrun

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// dirID identifies a directory: the wrapper mounts the workspace only if
// the directory it opens is the one checked here.
type dirID struct{ Dev, Ino uint64 }

// CheckWorkspace refuses a workspace that is not a plain directory reached
// without symlinks, and returns the identity of the directory it opened
// (once, O_PATH|O_NOFOLLOW) and checked. Whether its file system can be
// an overlay lower layer is the kernel's answer to the wrapper's mount,
// which refuses the run before the command starts.
func CheckWorkspace(ws string) (dirID, *Refusal) {
	if rf := checkWorkspace(ws); rf != nil {
		return dirID{}, rf
	}
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return dirID{}, refuse(ReasonWorkspace, "--workspace", "pass an existing directory", "open %s: %v", ws, err)
	}
	defer unix.Close(fd)
	var st, lst unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return dirID{}, refuse(ReasonWorkspace, "--workspace", "", "stat %s: %v", ws, err)
	}
	if err := unix.Lstat(ws, &lst); err != nil || lst.Dev != st.Dev || lst.Ino != st.Ino {
		return dirID{}, refuse(ReasonWorkspace, "--workspace", "leave the workspace in place while the run starts", "%s changed while it was checked", ws)
	}
	return dirID{Dev: st.Dev, Ino: st.Ino}, nil
}

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
