package observe

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// HostExecutable is the file a host command's argv[0] resolved to, open
// for reading: the fd that was hashed is the one the host front door
// executes (execveat AT_EMPTY_PATH), so what was hashed is what runs.
type HostExecutable struct {
	File   *os.File
	Path   string // the path looked up, before symlinks
	SHA256 string // hex
}

// OpenHost resolves arg0 on the host with the rules used inside a rootfs
// (an explicit path relative to cwd, else each absolute entry of env's
// PATH; the first regular file with an exec bit), "/" being the root, then
// hashes the file from the fd it returns. The caller closes File.
func OpenHost(arg0, cwd string, env []string) (*HostExecutable, error) {
	if arg0 == "" {
		return nil, fmt.Errorf("observe host command: argv[0] is empty: %w", ErrInvalidBundle)
	}
	root, err := os.OpenFile("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open host root: %w", err)
	}
	defer root.Close()
	exe, err := resolve(root, arg0, cwd, pathOf(env))
	if err != nil {
		return nil, fmt.Errorf("observe host command: %w", err)
	}
	sum, err := hashExecutable(exe)
	if err != nil {
		exe.f.Close()
		return nil, fmt.Errorf("observe host command: %w", err)
	}
	return &HostExecutable{File: exe.f, Path: exe.path, SHA256: sum}, nil
}

// ResolveHost resolves arg0 as OpenHost does and returns the file open for
// reading, without hashing it: a caller that executes a copy of the bytes
// (hostrun's sealed memfd) hashes the copy instead. The size is checked
// against MaxExecutableBytes; the caller closes the file.
func ResolveHost(arg0, cwd string, env []string) (f *os.File, resolved string, err error) {
	if arg0 == "" {
		return nil, "", fmt.Errorf("observe host command: argv[0] is empty: %w", ErrInvalidBundle)
	}
	root, err := os.OpenFile("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", fmt.Errorf("open host root: %w", err)
	}
	defer root.Close()
	exe, err := resolve(root, arg0, cwd, pathOf(env))
	if err != nil {
		return nil, "", fmt.Errorf("observe host command: %w", err)
	}
	if err := checkSize(exe); err != nil {
		exe.f.Close()
		return nil, "", fmt.Errorf("observe host command: %w", err)
	}
	return exe.f, exe.path, nil
}

// HostObservation is the observation of a host command: the uid/gid it
// runs as, the executable's sha256 and the command digest over exactly
// the argv, env and cwd it is executed with.
func HostObservation(uid, gid uint32, exeSHA256 string, args, env []string, cwd string) (spec.Observation, error) {
	cmd, err := CommandDigest(args, env, cwd)
	if err != nil {
		return spec.Observation{}, fmt.Errorf("observe host command: %w", err)
	}
	return spec.Observation{Schema: spec.SchemaObservation, UID: uid, GID: gid,
		ExecutableSHA256: exeSHA256, CommandDigest: cmd}, nil
}
