package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit codes. The top-level help lists them; scripts rely on them.
const (
	ExitOK       = 0 // done
	ExitRefused  = 1 // a document is invalid, a signature, expiry or trust rule refused it, staged products do not match their manifest, a promotion check refused, a verifier judged a product fail, or attention clear found nothing set
	ExitUsage    = 2 // usage error, or a file could not be read or written
	ExitObserved = 3 // boundary audit: some granted control is not verified enforceable here
	ExitDefeated = 4 // boundary audit --operation: a control_defeat signature fired (a control was defeated)
)

// Error is a command failure with its exit code. It renders as the
// operator's sentence "<what failed>: <why>; <fix>"; Main prefixes "gensee: ".
type Error struct {
	Code int
	What string // what failed, "verb object"; the dispatcher prefixes the command path
	Err  error  // why
	Fix  string // what to do; empty when Err already says it
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.What)
	if e.Err != nil {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		// Main prefixes "gensee: " once; an engine refusal's sentence
		// starts with its own (spec.RefusalPrefix).
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "gensee: "))
	}
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// fail returns an *Error; what may be empty, fix may be empty.
func fail(code int, what string, err error, fix string) *Error {
	return &Error{Code: code, What: what, Err: err, Fix: fix}
}

// usageError marks a command-line mistake; the dispatcher adds the command
// path and points at --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func errUsage(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// ExitCode maps an error returned by a command to its exit code. Errors
// that are neither *Error nor usage errors are I/O-class failures.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitUsage
}

// exitStatus passes a status through without a message: boundary run
// exits with its command's own status.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// report writes err to w as "gensee: ..." and returns its exit code.
func report(w io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	var s exitStatus
	if errors.As(err, &s) {
		return int(s)
	}
	fmt.Fprintf(w, "gensee: %s\n", err)
	return ExitCode(err)
}
