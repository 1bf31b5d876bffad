// Package runtimeopts translates the runtime options containerd sends with a
// task (runc options, or runtimeoptions.v1.Options from CRI and `ctr
// --runtime-config-path`) into the runc options the wrapped task service
// understands, the operator config's pinned fields holding. It is the
// shim's: the CLI, host runs and the OCI hook never link containerd's
// protobuf types (their init would slow every start).
package runtimeopts

import (
	"bytes"
	"fmt"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/typeurl/v2"
	"github.com/pelletier/go-toml/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/gensee/gensee/shim/config"
)

// proto is o in runc form.
func proto(o config.RuncOptions) *runcoptions.Options {
	return &runcoptions.Options{
		BinaryName:    o.BinaryName,
		Root:          o.Root,
		SystemdCgroup: o.SystemdCgroup,
		NoPivotRoot:   o.NoPivotRoot,
		NoNewKeyring:  o.NoNewKeyring,
		ShimCgroup:    o.ShimCgroup,
		IoUid:         o.IoUID,
		IoGid:         o.IoGID,
		CriuImagePath: o.CriuImagePath,
		CriuWorkPath:  o.CriuWorkPath,
	}
}

// Runtime is what the runtime options of one task resolve to.
type Runtime struct {
	// ConfigPath is the operator config named by the options ("" = default).
	ConfigPath string
	// Body holds runc options sent inline (CRI's options table as TOML).
	Body *config.RuncOptions
	// Runc are options already in runc form (a caller using the runc type).
	Runc *runcoptions.Options
}

// ParseOptions reads the task's runtime options Any. Unknown option types
// are refused rather than passed to runc, which would fail or panic on them.
func ParseOptions(a *anypb.Any) (Runtime, error) {
	if a == nil || a.GetTypeUrl() == "" {
		return Runtime{}, nil
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return Runtime{}, fmt.Errorf("decode runtime options %s: %w", a.GetTypeUrl(), err)
	}
	switch o := v.(type) {
	case *runcoptions.Options:
		return Runtime{Runc: o}, nil
	case *runtimeoptions.Options:
		rt := Runtime{ConfigPath: o.GetConfigPath()}
		if body := o.GetConfigBody(); len(body) > 0 {
			var ro config.RuncOptions
			// The CRI options table may also carry keys meant for containerd
			// itself (e.g. TypeUrl); only runc keys are read from it.
			if err := toml.NewDecoder(bytes.NewReader(body)).Decode(&ro); err != nil {
				return Runtime{}, fmt.Errorf("decode runtime options body: %w", err)
			}
			rt.Body = &ro
		}
		return rt, nil
	default:
		return Runtime{}, fmt.Errorf("runtime options of type %s are not supported; use runtimeoptions.v1.Options (ConfigPath/ConfigBody) or runc options", a.GetTypeUrl())
	}
}

// RuncAny returns the runc options for the task service: inline runc
// options win, then the CRI body, then the operator config's [runc] table.
//
// The operator's BinaryName, Root and NoPivotRoot always hold, whatever the
// caller sent: another runc binary would run the container outside every
// check made here, another state root would hide it from the shim's own
// runc, and running without pivot_root leaves the host's mounts reachable
// from a chroot that CAP_SYS_CHROOT can leave. A caller may repeat the
// operator's values; a different one is an *OptionRefusal.
func (rt Runtime) RuncAny(cfg config.Config) (*anypb.Any, error) {
	o, err := rt.RuncOptions(cfg)
	if err != nil {
		return nil, err
	}
	a, err := typeurl.MarshalAnyToProto(o)
	if err != nil {
		return nil, fmt.Errorf("encode runc options: %w", err)
	}
	return a, nil
}

// RuncOptions is RuncAny before encoding.
func (rt Runtime) RuncOptions(cfg config.Config) (*runcoptions.Options, error) {
	op := proto(cfg.Runc)
	o := op
	switch {
	case rt.Runc != nil:
		o = rt.Runc
	case rt.Body != nil:
		o = proto(*rt.Body)
	}
	if o != op {
		if err := pinned(o, op); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// OptionRefusal is a caller runtime option that would replace one the
// operator pins.
type OptionRefusal struct {
	Field, Got, Want string
}

func (e *OptionRefusal) Error() string {
	want := e.Want
	if want == "" {
		want = "unset"
	}
	return fmt.Sprintf("the runtime options set %s to %q, but the operator config pins it (%s); remove it from the caller's runtime options (ctr --runc-binary/--runc-root, the CRI options table) or set it in the operator config's [runc] table", e.Field, e.Got, want)
}

// pinned checks o against the operator's pinned fields and copies them in.
func pinned(o, op *runcoptions.Options) error {
	if o.BinaryName != "" && o.BinaryName != op.BinaryName {
		return &OptionRefusal{Field: "BinaryName", Got: o.BinaryName, Want: op.BinaryName}
	}
	if o.Root != "" && o.Root != op.Root {
		return &OptionRefusal{Field: "Root", Got: o.Root, Want: op.Root}
	}
	if o.NoPivotRoot && !op.NoPivotRoot {
		return &OptionRefusal{Field: "NoPivotRoot", Got: "true", Want: "false"}
	}
	o.BinaryName, o.Root, o.NoPivotRoot = op.BinaryName, op.Root, op.NoPivotRoot
	return nil
}
