package specpolicy

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// HasHooks sees a hook in any list runc runs, and none in empty ones.
func TestHasHooks(t *testing.T) {
	if HasHooks(&specs.Spec{}) || HasHooks(&specs.Spec{Hooks: &specs.Hooks{}}) {
		t.Error("hooks without any")
	}
	if !HasHooks(&specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{{Path: "/bin/true"}}}}) {
		t.Error("a createRuntime hook not seen")
	}
	//lint:ignore SA1019 deprecated, but runc still runs it
	prestart := &specs.Hooks{Prestart: []specs.Hook{{Path: "/bin/true"}}}
	if !HasHooks(&specs.Spec{Hooks: prestart}) {
		t.Error("a prestart hook not seen")
	}
}
