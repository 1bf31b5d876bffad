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
	return notifierFor(op, op.id, op.containerID)
}

// notifierFor is op's notify command for a finding on operation opID
// (another operation's, when retention's re-verification raised it).
func notifierFor(op *operation, opID, containerID string) *notify.Notifier {
	return notify.New(notify.Config{Argv: op.cfg.NotifyCommand, OperationID: opID, ContainerID: containerID,
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
