// Package observe derives, from an OCI bundle, the observation an inference
// must have been made for (docs/design.md §3): the process's uid/gid, the sha256 of
// the executable process.args[0] resolves to inside the rootfs, and the
// command digest.
//
// It owns resolving args[0] the way runc will (explicit path relative to
// process.cwd, else the container's PATH) and hashing the file it finds.
// command_digest is spec.Command{args, env, cwd}.Digest() over the values
// verbatim: "sha256:<hex>" of {"args":[...],"cwd":"...","env":[...]}.
//
// It must never follow a container-controlled path out of the rootfs: every
// lookup inside the rootfs goes through openat2 with RESOLVE_IN_ROOT (so an
// absolute symlink such as /bin/sh -> /bin/busybox, or ../../etc/passwd,
// resolves against the rootfs root) and RESOLVE_NO_MAGICLINKS; files are
// opened O_NONBLOCK, fstat'ed before any read, and read with a bound. It
// never writes, never executes, and never decides admission.
package observe
