// Package asuser opens files with the file-system credentials of another
// account: a root process acting for the user who invoked it opens what
// that user names exactly as the user could, and never more.
//
// How: a goroutine locks itself to an OS thread, sets that thread's
// supplementary groups (setgroups is per thread in the raw syscall; Go's
// syscall.Setgroups would change every thread), fsgid and fsuid (setfsuid
// away from 0 also drops the file capabilities — CAP_DAC_OVERRIDE,
// CAP_FOWNER and the like — from the thread's effective set), opens, and
// restores all three, each read back. When a restore cannot be confirmed
// the goroutine exits still locked, so the Go runtime ends that thread
// instead of reusing it with the user's credentials.
//
// Invariants: only the open (and its fstat) runs with the user's
// credentials; nothing follows a symlink at the last component
// (O_NOFOLLOW), waits on a fifo (O_NONBLOCK) or takes a tty (O_NOCTTY);
// only a regular file is read or written (fstat of the opened fd); reads
// are bounded (fsafe); a write is in place (O_TRUNC, no rename), so a file
// is only ever replaced by someone who could write it.
//
// It decides nothing (which account, which paths): callers do. It must
// never change the credentials of a thread it does not own.
package asuser
