package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/containerd/log"
)

// Env is everything a command touches outside its flags. Tests build one
// with buffers, a fixed clock and a fake host; OSEnv is the real process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	Now    func() time.Time
	// Probe answers boundary audit's questions about this host.
	Probe Prober

	global *globalOptions // set by dispatch
}

// OSEnv is the environment of the running process.
func OSEnv() *Env {
	return &Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		Now:    time.Now,
		Probe:  probeHost,
	}
}

// Main runs the command line args (without the program name) and returns
// the process exit code. It never panics: a bug surfaces as exit 2 with a
// message asking for a report.
func Main(ctx context.Context, env *Env, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.Stderr, "gensee: internal error: %v; please report it with the command line that caused it\n", r)
			code = ExitUsage
		}
	}()
	e := *env // dispatch sets the global options on its own copy
	return report(env.Stderr, dispatch(ctx, &e, root(), args))
}

// globals are the global options dispatch parsed (their defaults before).
func (e *Env) globals() *globalOptions {
	if e.global == nil {
		e.global = defaultGlobals(e.Getenv)
	}
	return e.global
}

// enableDebug sends the containerd client's log, at debug level, to stderr.
func (e *Env) enableDebug() {
	log.L.Logger.SetOutput(e.Stderr)
	_ = log.SetLevel("debug")
}

// debugf writes a debug line when --debug is on.
func (e *Env) debugf(format string, args ...any) {
	if e.global != nil && e.global.debug {
		fmt.Fprintf(e.Stderr, "gensee: debug: "+format+"\n", args...)
	}
}

// warnf writes a warning that does not change the exit code.
func (e *Env) warnf(format string, args ...any) {
	fmt.Fprintf(e.Stderr, "gensee: warning: "+format+"\n", args...)
}
