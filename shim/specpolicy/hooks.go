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
	for _, k := range hookKinds(h) {
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

// hookKind is one of the spec's hook lists, by its JSON name.
type hookKind struct {
	name  string
	hooks []specs.Hook
}

// hookKinds lists every hook list runc runs (none for nil).
func hookKinds(h *specs.Hooks) []hookKind {
	if h == nil {
		return nil
	}
	return []hookKind{
		{"prestart", h.Prestart}, //lint:ignore SA1019 deprecated, but runc still runs it
		{"createRuntime", h.CreateRuntime},
		{"createContainer", h.CreateContainer},
		{"startContainer", h.StartContainer},
		{"poststart", h.Poststart},
		{"poststop", h.Poststop},
	}
}

// HasHooks reports whether the spec names any hook runc would run.
func HasHooks(s *specs.Spec) bool {
	for _, k := range hookKinds(s.Hooks) {
		if len(k.hooks) > 0 {
			return true
		}
	}
	return false
}
