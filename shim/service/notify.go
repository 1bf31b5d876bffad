package service

import (
	"os"
	"time"

	"github.com/gensee/gensee/spec"
)

// notify runs the operator's notify command for a finding, bounded, with
// the finding in its environment.
func notify(op *operation, f spec.Finding) {
	argv := op.cfg.NotifyCommand
	if len(argv) == 0 {
		return
	}
	env := append(os.Environ(), "GENSEE_OPERATION_ID="+op.id, "GENSEE_CONTAINER_ID="+op.containerID,
		"GENSEE_SIGNATURE="+f.Signature, "GENSEE_DETAIL="+f.Detail)
	go runBounded(op, argv, env, 10*time.Second)
}
