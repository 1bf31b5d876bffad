package contrib

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/runtimeopts"
	"github.com/gensee/gensee/shim/service"
)

const (
	// criPlugin is the config version 3 plugin that holds CRI runtime handlers.
	criPlugin = "io.containerd.cri.v1.runtime"
	// handler is the CRI runtime handler name a RuntimeClass refers to.
	handler = "gensee"
	// shimDir is where the kit installs the shim and puts first on
	// containerd's PATH.
	shimDir = "/usr/local/bin"
)

// criRuntimeKeys are the keys of a CRI runtime table in containerd v2.4
// (internal/cri/config.Runtime). containerd ignores unknown keys, so a typo
// would silently drop e.g. the annotation pass-through.
var criRuntimeKeys = []string{"runtime_type", "runtime_path", "pod_annotations", "container_annotations", "options",
	"privileged_without_host_devices", "privileged_without_host_devices_all_devices_allowed", "cgroup_writable",
	"base_runtime_spec", "cni_conf_dir", "cni_max_conf_num", "snapshotter", "sandboxer", "disable_pause_image_pull", "io_type"}

// shimBinary is the binary containerd resolves a runtime type to: the last
// two dot-separated components, "containerd-shim-<name>-<version>".
func shimBinary(runtimeType string) string {
	parts := strings.Split(runtimeType, ".")
	return "containerd-shim-" + parts[len(parts)-2] + "-" + parts[len(parts)-1]
}

// TestContribContainerd: the containerd drop-in declares the gensee handler
// with the runtime's type, passes exactly the runtime's annotations through,
// and names the default operator config in options CRI will really send.
func TestContribContainerd(t *testing.T) {
	k := loadKit(t)
	m := k.toml["containerd/gensee-runtime.toml"]
	if v, _ := m["version"].(int64); v != 3 {
		t.Errorf("version = %v, want 3 (containerd >= 2.x config)", m["version"])
	}
	runtimes, _ := at(m, "plugins", criPlugin, "containerd", "runtimes").(map[string]any)
	rt, ok := runtimes[handler].(map[string]any)
	if !ok || len(runtimes) != 1 {
		t.Fatalf(`want exactly [plugins.%q.containerd.runtimes.%s], got %v`, criPlugin, handler, runtimes)
	}
	for key := range rt {
		if !slices.Contains(criRuntimeKeys, key) {
			t.Errorf("runtime table key %q is not a containerd CRI runtime key (containerd would ignore it)", key)
		}
	}
	if rt["runtime_type"] != service.RuntimeName {
		t.Errorf("runtime_type = %v, want %s", rt["runtime_type"], service.RuntimeName)
	}
	if s, ok := rt["sandboxer"]; ok && s != "podsandbox" {
		t.Errorf("sandboxer = %v: the pause container must go through this runtime (podsandbox)", s)
	}
	for _, key := range []string{"pod_annotations", "container_annotations"} {
		checkPassThrough(t, key, rt[key])
	}
	checkOptions(t, rt["options"])
}

// checkPassThrough: the patterns let both gensee annotations through and
// nothing outside io.gensee.boundary.
func checkPassThrough(t *testing.T, key string, v any) {
	t.Helper()
	var patterns []string
	l, _ := v.([]any)
	for _, p := range l {
		s, _ := p.(string)
		patterns = append(patterns, s)
		if !strings.HasPrefix(s, "io.gensee.boundary.") {
			t.Errorf("%s: pattern %q lets annotations outside io.gensee.boundary.* into the runtime's spec", key, s)
		}
	}
	for _, a := range []string{service.AnnotationInference, service.AnnotationObservation, admission.AnnotationInference, admission.AnnotationObservation} {
		if !slices.ContainsFunc(patterns, func(p string) bool { ok, _ := path.Match(p, a); return ok }) {
			t.Errorf("%s %v does not pass %s through", key, patterns, a)
		}
	}
}

// checkOptions: the handler has no options table. CRI then sends no
// runtime options and the shim reads /etc/gensee/config.toml (or
// GENSEE_CONFIG of containerd's environment); with a table CRI would send
// runtimeoptions.v1.Options, and containerd's client then cannot give a
// user-namespaced pod's task its IO owner (it wants runc options).
func checkOptions(t *testing.T, v any) {
	t.Helper()
	if v != nil {
		t.Errorf("the handler has an options table %v: CRI would send runtimeoptions.v1.Options and user-namespaced pods would fail in containerd; keep the operator config at /etc/gensee/config.toml (its [runc] table holds runc options)", v)
	}
	rt, err := runtimeopts.ParseOptions(nil)
	if err != nil || rt.ConfigPath != "" {
		t.Errorf("no options: %+v %v, want the default operator config", rt, err)
	}
}

// TestContribSystemd: the drop-in puts the shim's directory ahead of
// /usr/bin on containerd's PATH, and names the binary's directory the
// installer uses.
func TestContribSystemd(t *testing.T) {
	k := loadKit(t)
	var pathEnv string
	section := ""
	for _, line := range strings.Split(string(k.raw["systemd/containerd.service.d/10-gensee.conf"]), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]" && strings.HasPrefix(line, "Environment=PATH="):
			pathEnv = strings.Trim(strings.TrimPrefix(line, "Environment=PATH="), `"`)
		default:
			t.Errorf("unexpected line in %s: %q", section, line)
		}
	}
	dirs := strings.Split(pathEnv, ":")
	i, j := slices.Index(dirs, shimDir), slices.Index(dirs, "/usr/bin")
	if i < 0 || (j >= 0 && j < i) {
		t.Errorf("PATH %q: want %s (the shim %s) ahead of /usr/bin", pathEnv, shimDir, shimBinary(service.RuntimeName))
	}
}
