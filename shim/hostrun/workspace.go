package hostrun

import (
	"os"
	"path/filepath"
)

// CheckWorkspace refuses a workspace that is not a plain directory reached
// without symlinks. Whether its file system can be an overlay lower layer
// is the kernel's answer to the wrapper's mount, which refuses the run
// before the command starts.
func CheckWorkspace(ws string) *Refusal {
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
