package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// tree builds a rootfs under t.TempDir: regular files "path" -> content
// (mode 0755), symlinks "path" -> "@target".
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if len(c) > 0 && c[0] == '@' {
			if err := os.Symlink(c[1:], full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func proc(args []string, env []string, cwd string) *specs.Spec {
	return &specs.Spec{Process: &specs.Process{Args: args, Env: env, Cwd: cwd, User: specs.User{UID: 1000, GID: 100}}}
}

func TestFromRootfsResolution(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		args  []string
		env   []string
		cwd   string
		want  string // content of the file that must be hashed
	}{
		{"absolute symlink resolved inside rootfs",
			map[string]string{"bin/busybox": "busybox", "bin/sh": "@/bin/busybox"},
			[]string{"/bin/sh", "-c", "true"}, nil, "/", "busybox"},
		{"escaping symlink stays inside",
			map[string]string{"etc/passwd": "inside", "bin/evil": "@/../../etc/passwd"},
			[]string{"/bin/evil"}, nil, "/", "inside"},
		{"relative escaping symlink stays inside",
			map[string]string{"etc/passwd": "inside", "bin/evil": "@../../../../../../etc/passwd"},
			[]string{"evil"}, []string{"PATH=/bin"}, "/", "inside"},
		{"relative path against cwd",
			map[string]string{"work/tools/run": "run"},
			[]string{"tools/run"}, nil, "/work", "run"},
		{"dotdot path resolved by the kernel in root",
			map[string]string{"bin/tool": "tool", "work/x": "x"},
			[]string{"../../../bin/tool"}, nil, "/work", "tool"},
		{"PATH order: first dir wins",
			map[string]string{"a/tool": "a", "b/tool": "b"},
			[]string{"tool"}, []string{"PATH=/a:/b"}, "/", "a"},
		{"PATH: last PATH entry in env wins",
			map[string]string{"a/tool": "a", "b/tool": "b"},
			[]string{"tool"}, []string{"PATH=/a", "PATH=/b"}, "/", "b"},
		{"PATH: relative entries skipped",
			map[string]string{"rel/tool": "rel", "b/tool": "b"},
			[]string{"tool"}, []string{"PATH=rel::/b"}, "/", "b"},
		{"default PATH when env has none",
			map[string]string{"usr/bin/tool": "usr", "bin/tool": "bin"},
			[]string{"tool"}, []string{"HOME=/root"}, "/", "usr"},
		{"PATH: directory of that name skipped",
			map[string]string{"a/tool/x": "dir", "b/tool": "b"},
			[]string{"tool"}, []string{"PATH=/a:/b"}, "/", "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.files)
			obs, err := FromRootfs(root, proc(tc.args, tc.env, tc.cwd))
			if err != nil {
				t.Fatal(err)
			}
			if obs.ExecutableSHA256 != sum(tc.want) {
				t.Errorf("hashed the wrong file: got %s, want sha256(%q)", obs.ExecutableSHA256, tc.want)
			}
			if obs.Schema != spec.SchemaObservation || obs.UID != 1000 || obs.GID != 100 {
				t.Errorf("observation = %+v", obs)
			}
		})
	}
}

func TestPathSkipsNonExecutable(t *testing.T) {
	root := tree(t, map[string]string{"b/tool": "b"})
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a/tool"), []byte("noexec"), 0o644); err != nil {
		t.Fatal(err)
	}
	obs, err := FromRootfs(root, proc([]string{"tool"}, []string{"PATH=/a:/b"}, "/"))
	if err != nil {
		t.Fatal(err)
	}
	if obs.ExecutableSHA256 != sum("b") {
		t.Error("a non-executable file earlier in PATH was chosen")
	}
	_, err = FromRootfs(root, proc([]string{"/a/tool"}, nil, "/"))
	if !errors.Is(err, ErrNotExecutable) {
		t.Errorf("explicit non-executable path: err = %v, want ErrNotExecutable", err)
	}
}

func TestEscapeNeverReadsHost(t *testing.T) {
	// No etc/passwd inside the rootfs: the escaping link must not reach the host's.
	root := tree(t, map[string]string{"bin/evil": "@/../../../../etc/passwd"})
	_, err := FromRootfs(root, proc([]string{"/bin/evil"}, nil, "/"))
	if !errors.Is(err, ErrExecutableNotFound) {
		t.Fatalf("err = %v, want ErrExecutableNotFound", err)
	}
}

func TestMissingExecutable(t *testing.T) {
	root := tree(t, map[string]string{"bin/other": "x"})
	for _, args := range [][]string{{"/bin/nope"}, {"nope"}} {
		_, err := FromRootfs(root, proc(args, []string{"PATH=/bin:/usr/bin"}, "/"))
		if !errors.Is(err, ErrExecutableNotFound) {
			t.Fatalf("%v: err = %v, want ErrExecutableNotFound", args, err)
		}
		t.Logf("message: %v", err)
	}
	_, err := FromRootfs(root, proc([]string{"other"}, []string{"PATH="}, "/"))
	if !errors.Is(err, ErrExecutableNotFound) {
		t.Errorf("empty PATH: err = %v, want ErrExecutableNotFound", err)
	}
}

func TestFifoDoesNotBlock(t *testing.T) {
	root := tree(t, map[string]string{"b/tool": "b"})
	for _, d := range []string{"bin", "a"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"bin/fifo", "a/tool"} {
		if err := unix.Mkfifo(filepath.Join(root, p), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 2)
	go func() {
		_, err := FromRootfs(root, proc([]string{"/bin/fifo"}, nil, "/"))
		done <- err
		obs, err := FromRootfs(root, proc([]string{"tool"}, []string{"PATH=/a:/b"}, "/"))
		if err == nil && obs.ExecutableSHA256 != sum("b") {
			err = errors.New("fifo in PATH was not skipped")
		}
		done <- err
	}()
	for i := range 2 {
		select {
		case err := <-done:
			if i == 0 && !errors.Is(err, ErrNotExecutable) {
				t.Errorf("fifo: err = %v, want ErrNotExecutable", err)
			}
			if i == 1 && err != nil {
				t.Errorf("fifo in PATH: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("observing a fifo blocked")
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	root := tree(t, nil)
	for _, cfg := range []*specs.Spec{nil, {}, proc(nil, nil, "/"), proc([]string{""}, nil, "/")} {
		if _, err := FromRootfs(root, cfg); !errors.Is(err, ErrInvalidBundle) {
			t.Errorf("err = %v, want ErrInvalidBundle", err)
		}
	}
}

// TestCommandDigest: the digest is spec.Command's over the process's
// args, env and cwd verbatim, and each of them changes it.
func TestCommandDigest(t *testing.T) {
	root := tree(t, map[string]string{"bin/sh": "sh", "w/x": "x"})
	digest := func(args, env []string, cwd string) string {
		t.Helper()
		obs, err := FromRootfs(root, proc(args, env, cwd))
		if err != nil {
			t.Fatal(err)
		}
		return obs.CommandDigest
	}
	base := digest([]string{"/bin/sh"}, nil, "/")
	want, _ := spec.Digest(map[string]any{"args": []string{"/bin/sh"}, "env": []string{}, "cwd": "/"})
	if base != want {
		t.Errorf("digest %s is not over {args,env,cwd}: want %s", base, want)
	}
	for _, other := range []string{
		digest([]string{"/bin/sh", "-c"}, nil, "/"),
		digest([]string{"/bin/sh"}, []string{"A=1"}, "/"),
		digest([]string{"/bin/sh"}, nil, "/w"),
		digest([]string{"/bin/../bin/sh"}, nil, "/"),
	} {
		if other == base {
			t.Error("a different command digests the same")
		}
	}
}

func TestFromBundle(t *testing.T) {
	bundle := t.TempDir()
	root := tree(t, map[string]string{"bin/busybox": "bb", "bin/sh": "@busybox"})
	if err := os.Symlink(root, filepath.Join(bundle, "rootfs")); err != nil {
		t.Fatal(err)
	}
	cfg := proc([]string{"sh"}, []string{"PATH=/bin"}, "/")
	cfg.Root = &specs.Root{Path: "rootfs"}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	obs, err := FromBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := spec.Command{Args: []string{"sh"}, Env: []string{"PATH=/bin"}, Cwd: "/"}.Digest()
	if obs.ExecutableSHA256 != sum("bb") || obs.CommandDigest != cmd {
		t.Errorf("observation = %+v", obs)
	}
	if _, err := FromBundle(t.TempDir()); !errors.Is(err, ErrInvalidBundle) {
		t.Errorf("no config.json: err = %v, want ErrInvalidBundle", err)
	}
}
