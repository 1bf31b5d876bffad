// Package fsafe owns the fd-safe path primitives every other package uses
// when it touches a file the shim does not fully control: a bounded
// no-follow read of a regular file, openat2 with one retry policy, an
// atomic (optionally durable) replace, a component-wise no-follow walk for
// where openat2 does not apply, and the fsyncs that make a tree durable.
//
// Invariants:
//   - Nothing here follows a symlink at a path's last component (O_NOFOLLOW),
//     waits on a fifo or acquires a tty (O_NONBLOCK|O_NOCTTY on reads), or
//     leaks an fd into a child (O_CLOEXEC on every open).
//   - A read never returns more than its bound: a file larger than the bound
//     by fstat is refused before a byte is read, one that grows past it
//     while read is refused after, both as *TooLargeError.
//   - Only regular files are read (*NotRegularError otherwise), checked
//     with fstat on the fd that is read, never on the path.
//   - Retries are bounded (MaxRetries): EINTR everywhere, and for openat2
//     the EAGAIN that RESOLVE_BENEATH/RESOLVE_IN_ROOT answer when a
//     concurrent rename makes the lookup unsure. Nothing loops forever.
//
// The package decides nothing: what a refusal means, which rule it breaks
// and what the operator should do are the caller's, which classifies the
// errors here with errors.Is and errors.As. It must never import the shim.
package fsafe
