package service

import (
	"context"
	"os/exec"

	"github.com/containerd/containerd/v2/pkg/sys/reaper"

	"github.com/gensee/gensee/shim/notify"
)

// notifier is the operation's notify command (notify_command), run as the
// shim runs: root.
func notifier(op *operation) *notify.Notifier {
	return notify.New(notify.Config{Argv: op.cfg.NotifyCommand, OperationID: op.id, ContainerID: op.containerID,
		Runtime: RuntimeName, Logger: op.logger(context.Background()), Start: reaped})
}

// reaped starts cmd under the shim's reaper, which reaps every child of
// this subreaper: cmd.Wait alone would race it for the exit status.
func reaped(cmd *exec.Cmd) (func() error, error) {
	ec, err := reaper.Default.Start(cmd)
	if err != nil {
		return nil, err
	}
	return func() error { return notify.ExitStatus(reaper.Default.Wait(cmd, ec)) }, nil
}
