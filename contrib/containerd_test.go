package contrib

import (
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/typeurl/v2"
	"github.com/pelletier/go-toml/v2"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/shim/config"
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

// checkOptions turns the options table into what CRI sends for a runtime
// type other than runc (containerd's GenerateRuntimeOptions) and parses it
// as the shim does.
func checkOptions(t *testing.T, v any) {
	t.Helper()
	opts, _ := v.(map[string]any)
	b, err := toml.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ro runtimeoptions.Options
	if err := toml.Unmarshal(b, &ro); err != nil {
		t.Fatalf("options table as runtimeoptions.v1.Options: %v", err)
	}
	if ro.ConfigPath == "" {
		ro.ConfigBody = b
	}
	a, err := typeurl.MarshalAnyToProto(&ro)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := config.ParseOptions(a)
	if err != nil {
		t.Fatalf("the shim refuses the options CRI would send: %v", err)
	}
	if rt.ConfigPath != config.DefaultPath {
		t.Errorf("options ConfigPath = %q, want the default operator config %s", rt.ConfigPath, config.DefaultPath)
	}
	// With ConfigPath set CRI sends no body: runc keys next to it are lost.
	runcKeys := tomlKeys(reflect.TypeOf(config.RuncOptions{}))
	for key := range opts {
		if key != "ConfigPath" {
			t.Errorf("options key %q: with ConfigPath set CRI drops it; runc keys (%v) belong in the operator config's [runc] table", key, runcKeys)
		}
	}
}

// tomlKeys lists the toml keys of struct type t.
func tomlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
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
