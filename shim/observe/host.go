package observe

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/spec"
)

// ResolveHost resolves arg0 on the host with the rules used inside a
// rootfs (an explicit path relative to cwd, else each absolute entry of
// env's PATH; the first regular file with an exec bit), "/" being the
// root, and returns the file open for reading, unhashed: hostrun executes
// a sealed copy of the bytes and hashes that copy. The size is checked
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
