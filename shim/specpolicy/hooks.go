package specpolicy

import (
	"fmt"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// checkHooks refuses every hook whose path is not, exactly, a clean absolute path on the
// operator's allowlist: runc runs hooks as root in the host namespaces, outside every
// boundary we set.
func checkHooks(h *specs.Hooks, op Operator) error {
	if h == nil {
		return nil
	}
	kinds := []struct {
		name  string
		hooks []specs.Hook
	}{
		{"prestart", h.Prestart}, //lint:ignore SA1019 deprecated, but runc still runs it
		{"createRuntime", h.CreateRuntime},
		{"createContainer", h.CreateContainer},
		{"startContainer", h.StartContainer},
		{"poststart", h.Poststart},
		{"poststop", h.Poststop},
	}
	for _, k := range kinds {
		for i, hk := range k.hooks {
			if filepath.IsAbs(hk.Path) && filepath.Clean(hk.Path) == hk.Path && slices.Contains(op.HookAllowlist, hk.Path) {
				continue
			}
			return refuse(RuleSpecHook, fmt.Sprintf("hooks.%s[%d]", k.name, i),
				"the spec runs hook %q (%s), which is not on the operator's hook allowlist; remove the hook, or have the operator add its absolute path to the hook allowlist", hk.Path, k.name)
		}
	}
	return nil
}
