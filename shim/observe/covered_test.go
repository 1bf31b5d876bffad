package observe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func coverRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/local/bin", "etc", "opt/app"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/true"), []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin", filepath.Join(root, "opt/app/bin")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestCheckMountsCover(t *testing.T) {
	root := coverRootfs(t)
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		dest    string
		covered bool
	}{
		{"unrelated mount", []string{"/bin/tool"}, nil, "/etc/hosts", false},
		{"mount on the file", []string{"/usr/bin/tool"}, nil, "/usr/bin/tool", true},
		{"mount on the parent", []string{"/usr/bin/tool"}, nil, "/usr/bin", true},
		{"mount on an ancestor", []string{"/usr/bin/tool"}, nil, "/usr", true},
		{"mount over the symlinked dir it resolves to", []string{"/bin/tool"}, nil, "/usr/bin", true},
		{"mount on the symlink itself", []string{"/bin/tool"}, nil, "/bin", true},
		{"mount through a symlinked destination", []string{"/usr/bin/tool"}, nil, "/opt/app/bin", true},
		{"mount on an earlier PATH entry", []string{"tool"}, []string{"PATH=/usr/local/bin:/usr/bin"}, "/usr/local/bin", true},
		{"mount on a later PATH entry", []string{"tool"}, []string{"PATH=/usr/bin:/usr/local/bin"}, "/usr/local/bin", false},
		{"mount on the root", []string{"/usr/bin/tool"}, nil, "/", true},
		{"mount on the script's interpreter", []string{"/usr/bin/tool"}, nil, "/bin/true", true},
		{"mount in a library directory", []string{"/usr/bin/tool"}, nil, "/usr/lib/x86_64-linux-gnu/libc.so.6", true},
		{"mount over the preload list", []string{"/usr/bin/tool"}, nil, "/etc/ld.so.preload", true},
		{"mount over the interpreter's resolved path", []string{"/usr/bin/tool"}, nil, "/usr/bin/true", true},
		{"mount under LD_LIBRARY_PATH", []string{"/usr/bin/tool"}, []string{"LD_LIBRARY_PATH=/opt/libs"}, "/opt/libs", true},
		{"mount under LD_PRELOAD's library", []string{"/usr/bin/tool"}, []string{"LD_PRELOAD=/data/x.so"}, "/data", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &specs.Spec{Process: &specs.Process{Args: tc.args, Env: tc.env, Cwd: "/"},
				Mounts: []specs.Mount{{Destination: "/proc", Type: "proc"}, {Destination: tc.dest, Type: "bind", Source: "/tmp"}}}
			err := CheckMountsCover(root, s)
			var ce *CoveredError
			if got := errors.As(err, &ce); got != tc.covered {
				t.Fatalf("covered = %v (%v), want %v", got, err, tc.covered)
			}
			if tc.covered && ce.Mount != 1 {
				t.Errorf("error %+v", ce)
			}
		})
	}
}
