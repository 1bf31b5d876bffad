package hooks

import (
	"strings"

	"github.com/gensee/gensee/shim/admission"
)

// Runtime is the selector's runtime fact for this front door: a catalog
// selector with match.runtime "oci-hooks" governs containers admitted by
// the hook, like any other runtime.
const Runtime = "oci-hooks"

// Namespace is the record namespace operations of this front door are
// indexed under: --namespace oci-hooks --container <container id>.
const Namespace = "oci-hooks"

// EngineOf names the container engine from the annotations it sets on every
// container ("podman", "cri-o"), or "" when none is recognised. It is
// recorded, never matched: whoever runs the engine can set annotations (and
// podman copies an image's into the container's), so it is no selector fact
// the container's author could not choose. An operator who wants one
// contract per engine gives each engine its own hooks directory and
// operator config (the hook's --config).
func EngineOf(a map[string]string) string {
	if a["io.container.manager"] == "libpod" {
		return "podman"
	}
	podman, crio := false, false
	for k := range a {
		podman = podman || strings.HasPrefix(k, "io.podman.annotations.")
		crio = crio || strings.HasPrefix(k, "io.kubernetes.cri-o.")
	}
	switch {
	case podman:
		return "podman"
	case crio:
		return "cri-o"
	}
	return ""
}

// facts are the trusted facts of a hook's admission.
func facts() admission.Facts { return admission.Facts{Runtime: Runtime} }
