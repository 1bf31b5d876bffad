package service

import (
	"context"
	"encoding/json"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// maxRequestSpec bounds the JSON document (an exec's process spec, an
// update's resources) the shim decodes from a request.
const maxRequestSpec = 1 << 20

// decodeForOperation finds the admitted operation of container id and
// decodes a request's JSON document a (what, for messages) into v, for a
// verb ("exec", "update") the shim admits before runc sees it.
func (s *service) decodeForOperation(id, verb, what string, a *anypb.Any, v any) (*operation, error) {
	op := s.get(id)
	if op == nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: %s refused: container %s has no admitted operation in this shim; recreate the task", verb, id)
	}
	if a == nil || len(a.GetValue()) > maxRequestSpec {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %s refused: %s is missing or larger than %d bytes", verb, what, maxRequestSpec)
	}
	if err := json.Unmarshal(a.GetValue(), v); err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: %s refused: decode %s: %v", verb, what, err)
	}
	return op, nil
}

// execRefused answers an exec refused before runc ran it: an
// admission_denied event in the operation's log (an exec never becomes an
// operation of its own, so it has no refusals line) and PermissionDenied
// with the refusal's sentence.
func execRefused(ctx context.Context, op *operation, execID string, rf *spec.Refusal) error {
	op.net.Note(spec.Event{Kind: spec.EventAdmissionDenied, Control: "admission", Rule: rf.Reason,
		Detail: "exec " + execID + ": " + rf.Message, Target: execID})
	op.logger(ctx).WithField("exec_id", execID).WithField("reason", rf.Reason).Warn(rf.Text())
	return errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "%s", rf.Error())
}

// Exec admits an exec'd process under the same capability policy as the
// init before runc runs it: ctr, CRI Exec, kubectl exec and exec probes
// build the process from the stored container spec, which is the caller's,
// not the one the shim narrowed. CAP_NET_RAW is removed from every set,
// anything the contract does not grant is refused with the same sentence
// as at Create, and no_new_privs is forced. The process joins the
// container's cgroup (runc exec) and is drained at exit with the rest.
func (s *service) Exec(ctx context.Context, r *taskAPI.ExecProcessRequest) (_ *emptypb.Empty, retErr error) {
	if r.ExecID == r.ID {
		// A process's TaskExit names it by its id: an exec named as the
		// container would be taken for the init's exit, held and reported
		// in its place.
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: exec id %q is the container's id; give the exec an id of its own", r.ExecID)
	}
	var p specs.Process
	op, err := s.decodeForOperation(r.ID, "exec", "the exec process spec", r.Spec, &p)
	if err != nil {
		return nil, err
	}
	held, rf := holdStdio("exec", &r.Stdin, &r.Stdout, &r.Stderr, op.cfg.LoggerAllowlist)
	if rf != nil {
		return nil, execRefused(ctx, op, r.ExecID, rf)
	}
	defer func() { s.keepStdio(r.ID, r.ExecID, held, retErr) }()
	if st := op.life.current(); st != opRunning {
		// The deadline, the sensors and the gate arm at Start: an exec
		// into a created task would run unwatched, and a task deleted
		// unstarted is never gated (not_run), so what the exec wrote
		// would leave with no verdict. runc would exec into a created
		// container; CRI and kubectl exec only into a running one.
		op.logger(ctx).WithField("exec_id", r.ExecID).WithField("state", st.String()).Warn("exec refused: the task is not running")
		return nil, errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: exec refused: exec_before_start: cannot exec in a task in %s state: the deadline, the sensors and the gate arm at Start; start the task first", st)
	}
	removed, err := specpolicy.CheckProcess(&p, specpolicy.Grants{Capabilities: op.contract.Capabilities}, op.execPolicy)
	var bound specpolicy.ExecBound
	if err == nil && op.execPolicy.Init != nil {
		bound, err = specpolicy.CheckExecBound(&p, op.execPolicy.Init)
	}
	if err != nil {
		rf, ok := spec.AsRefusal(err)
		if !ok {
			return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: %v", err)
		}
		return nil, execRefused(ctx, op, r.ExecID, rf)
	}
	// What runc runs is what was checked: the spec is re-encoded from the
	// decoded value, so duplicate keys or unknown fields cannot differ
	// between this check and runc's reading.
	b, err := json.Marshal(&p)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: encode the exec process spec: %v", err)
	}
	r.Spec.Value = b
	// The bound admission record is durable before the exec runs (Start
	// waited for it too).
	if err := op.waitRecorded(); err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: exec refused: the admission record was not written (%v): delete the task and create it again", err)
	}
	if err := op.recordExec(r.ExecID, removed, bound); err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrUnavailable, "gensee: exec refused: the exec's admission record was not written (%v); retry the exec", err)
	}
	resp, err := s.TTRPCTaskService.Exec(ctx, r)
	if err == nil && len(removed) > 0 {
		// A routine rewrite, recorded once as a fact of the manifest
		// (enforcement.capabilities_removed_execs) and per exec in
		// execs.jsonl, not as an event.
		op.capExecs.Add(1)
	}
	return resp, err
}
