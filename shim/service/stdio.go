package service

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
)

// checkStdio admits the stdio URIs of a task (CreateTaskRequest) or an
// exec (ExecProcessRequest) before the inner service acts on them: the
// runc shim opens them as root in the host's namespaces. Admitted: empty,
// or an absolute plain path to an existing FIFO (what ctr's and CRI's
// cio sets make), or binary:// and binary-v2:// naming a logger on the
// operator's logger_allowlist (the shim would run it as root outside every
// boundary, as a hook). file:// (the workload's output appended to any
// host path) and everything else are refused. verb is "task" or "exec".
func checkStdio(verb string, stdin, stdout, stderr string, allow []string) error {
	for _, s := range []struct{ name, uri string }{{"stdin", stdin}, {"stdout", stdout}, {"stderr", stderr}} {
		if s.uri == "" {
			continue
		}
		if err := checkStdioURI(s.uri, allow); err != nil {
			return refuse("stdio_uri", "the %s's %s %q %v", verb, s.name, s.uri, err)
		}
	}
	return nil
}

func checkStdioURI(uri string, allow []string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("is no URI (%v); use a FIFO's path", err)
	}
	switch u.Scheme {
	case "":
		if !filepath.IsAbs(uri) || filepath.Clean(uri) != uri {
			return fmt.Errorf("is not an absolute, clean path; use a FIFO's path (containerd's cio makes them)")
		}
		st, err := os.Lstat(uri)
		if err != nil {
			return fmt.Errorf("cannot be checked (%v): only an existing FIFO is opened; create it first (containerd's cio does)", err)
		}
		if st.Mode()&os.ModeNamedPipe == 0 {
			return fmt.Errorf("is not a FIFO (mode %v): the runtime would open it as root and read or write the host file; use a FIFO", st.Mode().Type())
		}
		return nil
	case "binary", "binary-v2":
		if u.Host == "" && u.Opaque == "" && filepath.IsAbs(u.Path) && slices.Contains(allow, u.Path) {
			return nil
		}
		return fmt.Errorf("runs logger %q as root outside every boundary and it is not on the operator's logger_allowlist; use FIFOs, or have the operator list the logger's absolute path in logger_allowlist", u.Path)
	case "file":
		return fmt.Errorf("would have the runtime append the workload's output, as root, to host path %q; use FIFOs (no --log-uri file://), or a logger on the operator's logger_allowlist", u.Path)
	}
	return fmt.Errorf("has scheme %q, which the runtime does not admit; use FIFOs, or a binary:// logger on the operator's logger_allowlist", u.Scheme)
}
