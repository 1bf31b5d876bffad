package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// bundle writes an OCI bundle whose process runs /bin/tool from rootfs/.
func bundle(t *testing.T, args []string, files map[string]os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	for name, mode := range files {
		p := filepath.Join(dir, "rootfs", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+name+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	cfg := specs.Spec{
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.Process{Args: args, Env: []string{"PATH=/bin"}, Cwd: "/", User: specs.User{UID: 1000, GID: 100}},
	}
	b, _ := json.Marshal(cfg)
	writeFile(t, dir, "config.json", string(b))
	return dir
}

func TestObserve(t *testing.T) {
	dir := bundle(t, []string{"/bin/tool", "--flag"}, map[string]os.FileMode{"bin/tool": 0o755})
	want, err := observe.FromBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := spec.CanonicalJSON(want)
	wantDigest, _ := want.Digest()

	r := std().run(t, "observe", "--bundle", dir)
	r.want(t, ExitOK, []string{string(wantJSON) + "\n"}, []string{"observation digest: " + wantDigest})
	if _, err := spec.ParseObservation([]byte(r.stdout)); err != nil {
		t.Errorf("output does not parse as an observation: %v", err)
	}
	std().run(t, "observe", "--bundle", dir, "--digest").want(t, ExitOK, []string{wantDigest + "\n"}, nil)
	std().run(t, "observe", "--rootfs", filepath.Join(dir, "rootfs"), "--config", filepath.Join(dir, "config.json")).
		want(t, ExitOK, []string{string(wantJSON)}, nil)

	// observe's output feeds inference make.
	kp := analyzerKeys(t)
	obs := writeFile(t, t.TempDir(), "obs.json", r.stdout)
	std().run(t, "inference", "make", "--observation", obs, "--class", "build", "--confidence", "9000", "--key", kp.private, "--out", filepath.Join(t.TempDir(), "i.json")).
		want(t, ExitOK, []string{wantDigest}, nil)
}

func TestObserveFailures(t *testing.T) {
	cases := []struct {
		name   string
		dir    func(t *testing.T) string
		code   int
		stderr string
	}{
		{"no executable", func(t *testing.T) string {
			return bundle(t, []string{"/bin/absent"}, map[string]os.FileMode{"bin/tool": 0o755})
		}, ExitRefused, "executable not found"},
		{"not executable", func(t *testing.T) string {
			return bundle(t, []string{"/bin/tool"}, map[string]os.FileMode{"bin/tool": 0o644})
		}, ExitRefused, "not an executable"},
		{"empty args", func(t *testing.T) string { return bundle(t, nil, nil) }, ExitRefused, "invalid bundle"},
		{"no bundle", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, ExitUsage, "no such file"},
		{"config not json", func(t *testing.T) string {
			d := t.TempDir()
			writeFile(t, d, "config.json", "{")
			return d
		}, ExitRefused, "invalid bundle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := std().run(t, "observe", "--bundle", tc.dir(t))
			r.want(t, tc.code, nil, []string{"gensee: observe: observe bundle", tc.stderr})
			if strings.TrimSpace(r.stdout) != "" {
				t.Errorf("stdout on failure: %q", r.stdout)
			}
		})
	}
}
