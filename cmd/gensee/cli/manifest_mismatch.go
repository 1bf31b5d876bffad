package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/notify"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/shim/watchdog"
)

// raiseMismatch records what verify found as boundary evidence
// (verify.Raise: the events and the attention, as the shim's watchdog
// does) and says on stderr what it raised. It never changes verify's exit
// code: what goes wrong here is a warning on stderr.
func raiseMismatch(env *Env, op *operation, res *verify.Result, now time.Time) {
	store, ok := op.stateStore()
	if !ok {
		env.warnf("no attention raised: %s is not an operation directory of the runtime's state dir; "+
			"run gensee manifest verify --operation ID (with --config F naming the runtime's config) to flag it", op.dir)
		return
	}
	reportRaised(env, op.id, op.who, op.notify, verify.Raise(store, op.id, res, now), "gensee manifest verify")
}

// reportRaised says on stderr what a re-hash raised (verify.Raise) on
// operation opID, warns of what it could not record, and hands the new
// findings to the operator's notify command (argv), whose runtime field
// names the command that found them.
func reportRaised(env *Env, opID, who string, argv []string, r verify.Raised, runtime string) {
	for _, err := range r.Errs {
		env.warnf("%v (run as root)", err)
	}
	if len(argv) > 0 && len(r.New) > 0 {
		n := notify.New(notify.Config{Argv: argv, OperationID: opID, ContainerID: who, Runtime: runtime})
		for _, f := range r.New {
			n.Finding(f)
		}
		notify.Wait() // the command outlives this process otherwise
	}
	switch {
	case r.Findings > 0:
		fmt.Fprintf(env.Stderr, "gensee: attention raised on operation %s: %s %s (gensee attention list shows it)\n",
			opID, plural(r.Findings, "finding"), watchdog.SignatureProductMismatch)
	case r.Already > 0:
		fmt.Fprintf(env.Stderr, "gensee: operation %s already has attention for these problems (gensee attention list)\n", opID)
	}
}

// stateStore is the state dir op lives in, when op is one of its
// operation directories (attention and events can only be recorded there).
func (op *operation) stateStore() (record.Store, bool) {
	if op.stateDir == "" || !record.ValidOperationID(op.id) {
		return record.Store{}, false
	}
	s := op.store()
	dir, err := s.OperationDir(op.id)
	if err != nil || filepath.Clean(dir) != filepath.Clean(op.dir) {
		return record.Store{}, false
	}
	return s, true
}
