package service

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// holdStdio admits the stdio URIs of a task (CreateTaskRequest) or an
// exec (ExecProcessRequest) before the inner service acts on them: the
// runc shim opens them as root in the host's namespaces. Admitted: empty,
// or an absolute plain path to a FIFO (what ctr's and CRI's cio sets
// make), or binary:// and binary-v2:// naming a logger on the operator's
// logger_allowlist (the shim would run it as root outside every boundary,
// as a hook). file:// (the workload's output appended to any host path)
// and everything else are refused. verb is "task" or "exec".
//
// A path is opened once (O_PATH, the last component not followed) and
// the FIFO check is made on what was opened; the request then names that
// open file (/proc/self/fd/N), so the inner service, which opens the
// paths later and in the background, opens the very FIFO admitted: a
// client that swaps the path for a symlink to a host file after the check
// gains nothing. The returned stdio keeps the files open until release,
// and maps the paths back for State.
func holdStdio(verb string, stdin, stdout, stderr *string, allow []string) (*heldStdio, *spec.Refusal) {
	h := &heldStdio{}
	for _, s := range []struct {
		name string
		uri  *string
	}{{"stdin", stdin}, {"stdout", stdout}, {"stderr", stderr}} {
		if *s.uri == "" {
			continue
		}
		f, err := checkStdioURI(*s.uri, allow)
		if err != nil {
			h.release()
			return nil, spec.Refuse("stdio_uri", s.name, "", "the %s's %s %q %v", verb, s.name, *s.uri, err)
		}
		if f != nil {
			h.files = append(h.files, f)
			held := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
			h.orig = append(h.orig, [2]string{held, *s.uri})
			*s.uri = held
		}
	}
	return h, nil
}

// heldStdio is the FIFOs holdStdio opened for one process.
type heldStdio struct {
	once  sync.Once
	files []*os.File
	orig  [][2]string // {what the inner service was given, the client's path}
}

// client is the client's path for p as the inner service reports it.
func (h *heldStdio) client(p string) string {
	if h != nil {
		for _, o := range h.orig {
			if o[0] == p {
				return o[1]
			}
		}
	}
	return p
}

// release closes the held files: once the process is deleted, or its
// create failed.
func (h *heldStdio) release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		for _, f := range h.files {
			f.Close()
		}
	})
}

// checkStdioURI checks one URI; for a plain path it returns the FIFO it
// opened.
func checkStdioURI(uri string, allow []string) (*os.File, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("is no URI (%v); use a FIFO's path", err)
	}
	switch u.Scheme {
	case "":
		if !filepath.IsAbs(uri) || filepath.Clean(uri) != uri {
			return nil, fmt.Errorf("is not an absolute, clean path; use a FIFO's path (containerd's cio makes them)")
		}
		fd, err := unix.Open(uri, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("cannot be opened (%v): only an existing FIFO is opened; create it first (containerd's cio does)", err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("cannot be checked (%v)", err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFIFO {
			unix.Close(fd)
			return nil, fmt.Errorf("is not a FIFO (mode %#o): the runtime would open it as root and read or write the host file; use a FIFO", st.Mode&unix.S_IFMT)
		}
		return os.NewFile(uintptr(fd), uri), nil
	case "binary", "binary-v2":
		if u.Host == "" && u.Opaque == "" && filepath.IsAbs(u.Path) && slices.Contains(allow, u.Path) {
			return nil, nil
		}
		return nil, fmt.Errorf("runs logger %q as root outside every boundary and it is not on the operator's logger_allowlist; use FIFOs, or have the operator list the logger's absolute path in logger_allowlist", u.Path)
	case "file":
		return nil, fmt.Errorf("would have the runtime append the workload's output, as root, to host path %q; use FIFOs (no --log-uri file://), or a logger on the operator's logger_allowlist", u.Path)
	}
	return nil, fmt.Errorf("has scheme %q, which the runtime does not admit; use FIFOs, or a binary:// logger on the operator's logger_allowlist", u.Scheme)
}
