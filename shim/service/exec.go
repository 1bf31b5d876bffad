package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// maxExecSpec bounds the exec process spec the shim decodes.
const maxExecSpec = 1 << 20

// Exec admits an exec'd process under the same capability policy as the
// init before runc runs it: ctr, CRI Exec, kubectl exec and exec probes
// build the process from the stored container spec, which is the caller's,
// not the one the shim narrowed. CAP_NET_RAW is removed from every set,
// anything the contract does not grant is refused with the same sentence
// as at Create, and no_new_privs is forced. The process joins the
// container's cgroup (runc exec) and is drained at exit with the rest.
func (s *service) Exec(ctx context.Context, r *taskAPI.ExecProcessRequest) (*emptypb.Empty, error) {
	op := s.get(r.ID)
	if op == nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrFailedPrecondition, "gensee: exec refused: container %s has no admitted operation in this shim; recreate the task", r.ID)
	}
	if r.Spec == nil || len(r.Spec.GetValue()) > maxExecSpec {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: the exec process spec is missing or larger than %d bytes", maxExecSpec)
	}
	var p specs.Process
	if err := json.Unmarshal(r.Spec.GetValue(), &p); err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: decode the exec process spec: %v", err)
	}
	removed, err := specpolicy.CheckProcess(&p, specpolicy.Grants{Capabilities: op.contract.Capabilities})
	if err != nil {
		var rf *specpolicy.Refusal
		if !errors.As(err, &rf) {
			return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: %v", err)
		}
		re := &refusedError{Reason: rf.Rule, Message: rf.Error()}
		if op.mon != nil {
			op.mon.Note(spec.Event{Kind: spec.EventAdmissionDenied, Control: "admission", Rule: rf.Rule,
				Detail: "exec " + r.ExecID + ": " + rf.Msg, Target: r.ExecID})
		}
		op.logger(ctx).WithField("exec_id", r.ExecID).WithField("reason", rf.Rule).Warn(re.Message)
		return nil, errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "%s", re.Error())
	}
	// What runc runs is what was checked: the spec is re-encoded from the
	// decoded value, so duplicate keys or unknown fields cannot differ
	// between this check and runc's reading.
	b, err := json.Marshal(&p)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: exec refused: encode the exec process spec: %v", err)
	}
	r.Spec.Value = b
	if len(removed) > 0 && op.mon != nil {
		op.mon.Note(spec.Event{Kind: spec.EventCapabilityRemoved, Control: "capabilities", Rule: capNetRaw,
			Detail: "removed from exec " + r.ExecID + " (" + strings.Join(removed, ", ") + "): AF_PACKET sockets would bypass the network table",
			Target: r.ExecID,
			Hint:   "the exec'd process cannot open packet sockets; use TCP/UDP/ICMP datagram sockets"})
	}
	return s.TTRPCTaskService.Exec(ctx, r)
}
