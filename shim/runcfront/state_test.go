package runcfront

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// plainState is the state.json of a stopped container as runc 1.5 writes
// it for a containerd task (the fields the front reads).
const plainState = `{"id":"t1","init_process_pid":4194000,"init_process_start":17,
 "cgroup_paths":{"":"/sys/fs/cgroup/unified/demo/t1","memory":"/sys/fs/cgroup/memory/demo/t1"},
 "config":{"namespaces":[{"type":"NEWPID"},{"type":"NEWNS"}],"cgroups":{"path":"/demo/t1"}}}`

func TestPlainDestroy(t *testing.T) {
	edit := func(f func(m map[string]any)) state {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(plainState), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		var st state
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	cfg := func(m map[string]any) map[string]any { return m["config"].(map[string]any) }
	if st := edit(func(map[string]any) {}); !st.plainDestroy() {
		t.Fatal("the plain state is not plain")
	}
	notPlain := map[string]func(m map[string]any){
		"poststop hook": func(m map[string]any) {
			cfg(m)["Hooks"] = map[string]any{"poststop": []any{map[string]any{"path": "/x"}}}
		},
		"shared pidns": func(m map[string]any) {
			cfg(m)["namespaces"] = []any{map[string]any{"type": "NEWPID", "path": "/proc/1/ns/pid"}}
		},
		"no pidns":        func(m map[string]any) { cfg(m)["namespaces"] = []any{map[string]any{"type": "NEWNS"}} },
		"intel rdt":       func(m map[string]any) { cfg(m)["intel_rdt"] = map[string]any{"closID": "x"} },
		"intel rdt path":  func(m map[string]any) { m["intel_rdt_path"] = "/sys/fs/resctrl/x" },
		"systemd":         func(m map[string]any) { cfg(m)["cgroups"] = map[string]any{"Systemd": true} },
		"rootless":        func(m map[string]any) { m["rootless"] = true },
		"rootless euid":   func(m map[string]any) { cfg(m)["rootless_euid"] = true },
		"rootless cgroup": func(m map[string]any) { cfg(m)["rootless_cgroups"] = true },
		"no cgroups":      func(m map[string]any) { delete(cfg(m), "cgroups") },
	}
	for name, f := range notPlain {
		if edit(f).plainDestroy() {
			t.Errorf("%s: plainDestroy = true", name)
		}
	}
	if st := edit(func(m map[string]any) { cfg(m)["Hooks"] = map[string]any{"poststop": []any{}} }); !st.plainDestroy() {
		t.Error("an empty hook list is not plain")
	}
}

func TestCgroupDirs(t *testing.T) {
	for paths, ok := range map[string]bool{
		`{"":"/sys/fs/cgroup/unified/a"}`:                   true,
		`{"":"/sys/fs/cgroup/a","pids":"/sys/fs/cgroup/b"}`: true,
		`{"":"/sys/fs/cgroup/../../etc"}`:                   false,
		`{"":"/tmp/x"}`:                                     false,
		`{"":"sys/fs/cgroup/x"}`:                            false,
		`{}`:                                                true,
	} {
		var st state
		if err := json.Unmarshal([]byte(`{"cgroup_paths":`+paths+`}`), &st); err != nil {
			t.Fatal(err)
		}
		if _, got := st.cgroupDirs(); got != ok {
			t.Errorf("%s: ok %v, want %v", paths, got, ok)
		}
	}
}

func TestFrozen(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "freezer"), filepath.Join(dir, "unified")
	os.Mkdir(v1, 0o755)
	os.Mkdir(v2, 0o755)
	st := state{CgroupPaths: map[string]string{"freezer": v1, "": v2}}
	if st.frozen() {
		t.Error("no freezer files: frozen")
	}
	os.WriteFile(filepath.Join(v1, "freezer.state"), []byte("THAWED\n"), 0o644)
	os.WriteFile(filepath.Join(v2, "cgroup.freeze"), []byte("0\n"), 0o644)
	if st.frozen() {
		t.Error("thawed: frozen")
	}
	os.WriteFile(filepath.Join(v1, "freezer.state"), []byte("FREEZING\n"), 0o644)
	if !st.frozen() {
		t.Error("v1 FREEZING: not frozen")
	}
	os.WriteFile(filepath.Join(v1, "freezer.state"), []byte("THAWED\n"), 0o644)
	os.WriteFile(filepath.Join(v2, "cgroup.freeze"), []byte("1\n"), 0o644)
	if !st.frozen() {
		t.Error("v2 freeze 1: not frozen")
	}
}

func FuzzParseCall(f *testing.F) {
	f.Add("--root\x00/r\x00--log\x00/b/log.json\x00start\x00x")
	f.Fuzz(func(t *testing.T, s string) {
		c := parseCall(splitNUL(s))
		_, _ = c.container("start"), c.bundle()
	})
}

func splitNUL(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
