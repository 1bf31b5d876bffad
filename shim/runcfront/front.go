package runcfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
)

// RuncFile is the file in a task's bundle that names the real runc (an
// absolute path, one line), written by the shim before the task's first
// runc call.
const RuncFile = "gensee-runc.path"

// Binary is the front's program, installed beside the full shim.
const Binary = "gensee-runc"

// Main answers the call in os.Args or hands it to the real runc; it does
// not return.
func Main() {
	c := parseCall(os.Args[1:])
	real, err := realRunc(c.bundle())
	if err != nil {
		fmt.Fprintf(os.Stderr, "gensee-runc: %v\n", err)
		os.Exit(1)
	}
	if handled, err := serve(context.Background(), c, os.Environ(), os.Stderr); handled {
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	err = unix.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "gensee-runc: run %s: %v\n", real, err)
	os.Exit(1)
}

// Serve answers the runc call args (a command line as go-runc writes it,
// without the program) with environment env where the front answers it
// itself, in the calling process: the shim calls it for a task whose runc
// is the front instead of running the front. handled is false, with
// nothing done, when the real runc must answer. A handled call that
// failed is reported as runc reports it, on stderr and in its --log, and
// its error returned. ctx bounds a start's wait for the init, as the
// call's context bounds a run of the front (go-runc kills it): a start
// whose ctx ends before the init wrote its byte is handled, with ctx's
// error, and the container not started; one whose ctx ends after is
// answered as done (Start).
func Serve(ctx context.Context, args, env []string, stderr io.Writer) (handled bool, err error) {
	return serve(ctx, parseCall(args), env, stderr)
}

// Target is the command and container of the runc call args when it is
// one the front may answer itself (`start ID` or `delete ID`, with the
// global flags go-runc writes for a task); "", "" otherwise.
func Target(args []string) (cmd, id string) {
	c := parseCall(args)
	for _, cmd := range []string{"start", "delete"} {
		if id := c.container(cmd); id != "" {
			return cmd, id
		}
	}
	return "", ""
}

func serve(ctx context.Context, c call, env []string, stderr io.Writer) (handled bool, err error) {
	handled, err = answer(ctx, c, env)
	if handled && err != nil {
		report(stderr, c.log, err)
	}
	return handled, err
}

// answer answers c itself where it can; handled is false when the real
// runc must (nothing was changed then).
func answer(ctx context.Context, c call, env []string) (handled bool, err error) {
	// runc start waits for the container's readiness message when
	// NOTIFY_SOCKET is set (go-runc removes it; a caller that passes it
	// on gets runc's own start).
	if id := c.container("start"); id != "" && !hasEnv(env, "NOTIFY_SOCKET") {
		return Start(ctx, filepath.Join(c.root, id))
	}
	if id := c.container("delete"); id != "" {
		return Delete(filepath.Join(c.root, id))
	}
	return false, nil
}

// hasEnv reports whether env sets name (to anything, as os.Getenv would
// find it non-empty).
func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name && v != "" {
			return true
		}
	}
	return false
}

// realRunc reads the real runc's path from the bundle's RuncFile: a
// regular file of this process's owner that nobody else may write, in
// directories only root or that owner may write, naming an absolute path.
func realRunc(bundle string) (string, error) {
	if bundle == "" {
		return "", errors.New("no task bundle in the call (--log <bundle>/log.json): gensee-runc runs only as the gensee shim's runc")
	}
	path := filepath.Join(bundle, RuncFile)
	euid := uint32(os.Geteuid())
	if err := fsafe.TrustedDirs(bundle, euid); err != nil {
		return "", fmt.Errorf("read the real runc's path: %w", err)
	}
	f, st, err := fsafe.OpenFile(path)
	if err != nil {
		return "", fmt.Errorf("read the real runc's path: %w", err)
	}
	defer f.Close()
	if st.Uid != euid || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("read the real runc's path: %s is not a file of uid %d that only its owner may write", path, euid)
	}
	b, err := fsafe.ReadAll(f, st, 4096)
	if err != nil {
		return "", fmt.Errorf("read the real runc's path: %w", err)
	}
	real := string(bytes.TrimSuffix(b, []byte("\n")))
	if !filepath.IsAbs(real) || filepath.Clean(real) != real || strings.ContainsFunc(real, unicode.IsControl) {
		return "", fmt.Errorf("read the real runc's path: %s names %q, not a clean absolute path", path, real)
	}
	return real, nil
}

// report writes err as runc reports a failed command: on stderr, and as a
// JSON error line in its --log, where containerd reads runc's last error.
func report(stderr io.Writer, logPath string, err error) {
	fmt.Fprintln(stderr, err)
	if logPath == "" {
		return
	}
	line, _ := json.Marshal(map[string]string{"level": "error", "msg": err.Error(), "time": time.Now().Format(time.RFC3339Nano)})
	f, ferr := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if ferr != nil {
		return
	}
	f.Write(append(line, '\n'))
	f.Close()
}
