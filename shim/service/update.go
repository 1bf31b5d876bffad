package service

import (
	"context"
	"encoding/json"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/gensee/gensee/shim/specpolicy"
	"github.com/gensee/gensee/spec"
)

// Update admits a resource update (ctr task update, CRI
// UpdateContainerResources) under the rules Create applied to
// linux.resources, and passes on exactly what was checked.
func (s *service) Update(ctx context.Context, r *taskAPI.UpdateTaskRequest) (*emptypb.Empty, error) {
	var res specs.LinuxResources
	op, err := s.decodeForOperation(r.ID, "update", "the resources", r.Resources, &res)
	if err != nil {
		return nil, err
	}
	if err := specpolicy.CheckResources(&res, "resources"); err != nil {
		if rf, ok := spec.AsRefusal(err); ok {
			op.logger(ctx).WithField("reason", rf.Reason).Warn(rf.Text())
			return nil, errgrpc.ToGRPCf(errdefs.ErrPermissionDenied, "gensee: update refused: %s", rf.Text())
		}
		return nil, errgrpc.ToGRPC(err)
	}
	b, err := json.Marshal(&res)
	if err != nil {
		return nil, errgrpc.ToGRPCf(errdefs.ErrInvalidArgument, "gensee: update refused: encode resources: %v", err)
	}
	r.Resources.Value = b
	return s.TTRPCTaskService.Update(ctx, r)
}
