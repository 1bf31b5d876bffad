// Command gensee-oci-hook is the OCI hooks front door (shim/hooks/): one binary
// for the createRuntime and poststop stages (told apart by the state's
// status), the per-operation monitor process it re-executes, and the
// seccomp profile an operator hands the engine.
//
//	gensee-oci-hook [--config FILE] [--grace 30s]          a hook stage; the OCI state on stdin
//	gensee-oci-hook monitor --operation ID --pid N ...     (started by createRuntime)
//	gensee-oci-hook seccomp-profile [BASE.json]            the profile to run containers with
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hooks"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "seccomp-profile" {
		return seccompProfile(args[1:], stdout, stderr)
	}
	monitor := len(args) > 0 && args[0] == hooks.MonitorArg
	if monitor {
		args = args[1:]
	}
	fs := flag.NewFlagSet("gensee-oci-hook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "operator config (default "+config.DefaultPath+")")
	grace := fs.Duration("grace", 30*time.Second, "how long the monitor waits for poststop once the container is gone")
	opID := fs.String("operation", "", "monitor: the operation id")
	pid := fs.Int("pid", 0, "monitor: the container's init")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "gensee: admission refused: operator_config: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "gensee: %v\n", err)
		return 1
	}
	o := hooks.Options{Config: cfg, ConfigPath: *cfgPath, Self: self, Grace: *grace}
	if monitor {
		log.L.Logger.SetOutput(stderr) // the operation's hook.log
		status := os.NewFile(3, "status")
		err := hooks.RunMonitor(ctx, hooks.MonitorRequest{Options: o, OperationID: *opID, PID: *pid, Status: status})
		if err != nil {
			log.G(ctx).WithError(err).Error("monitor")
			return 1
		}
		return 0
	}
	// The engine shows a failing hook's stderr: keep it to the one sentence.
	log.L.Logger.SetOutput(io.Discard)
	s, err := hooks.ReadState(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "gensee: %v\n", err)
		return 1
	}
	if s.Status == hooks.StatusStopped {
		if err := hooks.Poststop(ctx, o, s); err != nil {
			fmt.Fprintf(stderr, "gensee: poststop: %v\n", err)
			return 1
		}
		return 0
	}
	if err := hooks.CreateRuntime(ctx, o, s); err != nil {
		var rf *hooks.Refusal
		if errors.As(err, &rf) {
			fmt.Fprintln(stderr, rf.Error())
		} else {
			fmt.Fprintf(stderr, "gensee: container refused: %v\n", err)
		}
		return 1
	}
	return 0
}

func seccompProfile(args []string, stdout, stderr io.Writer) int {
	var base io.Reader
	switch len(args) {
	case 0:
	case 1:
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintf(stderr, "gensee-oci-hook: %v\n", err)
			return 1
		}
		defer f.Close()
		base = f
	default:
		fmt.Fprintln(stderr, "usage: gensee-oci-hook seccomp-profile [BASE.json]")
		return 2
	}
	b, err := hooks.SeccompProfile(base)
	if err != nil {
		fmt.Fprintf(stderr, "gensee-oci-hook: %v\n", err)
		return 1
	}
	stdout.Write(append(b, '\n'))
	return 0
}
