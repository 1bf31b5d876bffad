package reference

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/log"
)

// Server timeouts: the runtime waits at most spec.MaxAnalyzerTimeout for
// an answer; a client slower than these is not the runtime.
const (
	readTimeout     = 5 * time.Second
	idleTimeout     = time.Minute
	shutdownTimeout = 2 * time.Second
)

// Serve answers requests on the unix socket at socket until ctx is done,
// then removes it. The socket's directory is created 0700 when missing; a
// stale socket there is replaced, anything else at that path is refused.
// The socket is mode 0600: only its owner (the runtime's user) connects.
func (a *Analyzer) Serve(ctx context.Context, socket string) (retErr error) {
	l, err := listen(socket)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout, WriteTimeout: readTimeout, IdleTimeout: idleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx) // closes l, which unlinks the socket
	}()
	log.G(ctx).WithField("socket", socket).WithField("analyzer", a.entry.ID).WithField("model", a.model).
		WithField("rules_version", a.rules.Version).Info("analyzer: serving")
	err = srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	l.Close()
	return fmt.Errorf("serve %s: %w", socket, err)
}

// listen makes the socket's directory (0700) if missing, checks no other
// user can bind in it, removes a stale socket, listens, and makes the
// socket 0600.
func listen(socket string) (_ *net.UnixListener, retErr error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := checkSocketDir(filepath.Dir(socket)); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(socket); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen %s: a %s is there, not a socket; remove it or pick another --listen", socket, st.Mode().Type())
		}
		if c, err := net.DialTimeout("unix", socket, 100*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another process is serving on it; stop it or pick another --listen", socket)
		}
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", socket, err)
	}
	l.SetUnlinkOnClose(true)
	defer func() {
		if retErr != nil {
			l.Close()
		}
	}()
	if err := os.Chmod(socket, 0o600); err != nil {
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// checkSocketDir refuses a socket directory another user could bind the
// endpoint in before the analyzer (the runtime would refuse that socket's
// peer, so every consult would fail): it must be a directory, not a
// symlink, owned by this process's user, and not writable by group or
// others.
func checkSocketDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("socket directory %s is a %s, not a directory; pick another --listen", dir, st.Mode().Type())
	case !ok || int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("socket directory %s is not owned by uid %d; chown it or pick another --listen", dir, os.Geteuid())
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("socket directory %s is writable by group or others (mode %04o): another user could bind the endpoint first; chmod go-w %s or pick another --listen",
			dir, st.Mode().Perm(), dir)
	}
	return nil
}
