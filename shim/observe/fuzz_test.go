package observe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolveStaysInRoot: whatever args[0], cwd and PATH say, the hashed
// file is one inside the rootfs, never the host file next to it that the
// rootfs's symlinks point at.
func FuzzResolveStaysInRoot(f *testing.F) {
	base := f.TempDir()
	host := filepath.Join(base, "host-secret")
	if err := os.WriteFile(host, []byte("HOST"), 0o755); err != nil {
		f.Fatal(err)
	}
	root := filepath.Join(base, "rootfs")
	inside := map[string]string{"bin/busybox": "busybox", "usr/bin/env": "env", "host-secret": "decoy"}
	links := map[string]string{
		"bin/sh": "/bin/busybox", "bin/up": "../host-secret", "bin/up2": "/../../host-secret",
		"bin/abs": host, "bin/loop": "loop", "proc-self": "/proc/self/exe",
	}
	allowed := map[string]bool{}
	for p, c := range inside {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o755); err != nil {
			f.Fatal(err)
		}
		allowed[sum(c)] = true
	}
	for p, target := range links {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range [][3]string{
		{"/bin/up", "/", ""}, {"up2", "/", "PATH=/bin"}, {"abs", "/", "PATH=/bin"}, {"../../host-secret", "/bin", ""},
		{host, "/", ""}, {"sh", "/", "PATH=/nope:/bin"}, {"/proc-self", "/", ""}, {"loop", "/", "PATH=/bin"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, arg0, cwd, env string) {
		if strings.ContainsRune(arg0+cwd+env, 0) {
			return
		}
		obs, err := FromRootfs(root, proc([]string{arg0}, []string{env}, cwd))
		if err != nil {
			return
		}
		if !allowed[obs.ExecutableSHA256] {
			t.Fatalf("args[0]=%q cwd=%q env=%q hashed a file outside the rootfs (%s)", arg0, cwd, env, obs.ExecutableSHA256)
		}
	})
}
