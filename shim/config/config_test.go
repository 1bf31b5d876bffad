package config

import (
	"os"
	"strings"
	"testing"
)

// TestLoadMissingDefault: with no file at the default path, what only
// reads records gets the built-in defaults; what enforces is refused, with
// the fix.
func TestLoadMissingDefault(t *testing.T) {
	if _, err := os.Lstat(DefaultPath); err == nil {
		t.Skip(DefaultPath + " exists on this host")
	}
	c, err := LoadOrDefaults("")
	if err != nil || c.Path != "" || c.StateDir != Default().StateDir {
		t.Fatalf("LoadOrDefaults: %+v, %v", c, err)
	}
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "contrib/gensee/config.toml") {
		t.Fatalf("Load without a config: %v", err)
	}
	if _, err := LoadOrDefaults("/nonexistent/gensee.toml"); err == nil {
		t.Fatal("a named config that does not exist was not an error")
	}
}

// TestPromotionRoots: promotion_roots are absolute, clean paths other
// than /, outside the state dir and not above it.
func TestPromotionRoots(t *testing.T) {
	c, err := Parse("/etc/gensee/config.toml", []byte(`promotion_roots = ["/srv/promoted", "/var/lib/artifacts"]`+"\n"))
	if err != nil || len(c.PromotionRoots) != 2 || c.PromotionRoots[0] != "/srv/promoted" {
		t.Fatalf("Parse: %+v, %v", c.PromotionRoots, err)
	}
	if len(Default().PromotionRoots) != 0 {
		t.Fatal("the default config promotes somewhere")
	}
	for _, bad := range []string{`"/"`, `"srv"`, `"/srv/../etc"`, `"/srv/"`, `"/var/lib/gensee/operations"`, `"/var/lib"`} {
		if _, err := Parse("/etc/gensee/config.toml", []byte("promotion_roots = ["+bad+"]\n")); err == nil {
			t.Errorf("promotion_roots = [%s] accepted", bad)
		}
	}
}

func TestLoadForTaskOnlyFromTrustedDirs(t *testing.T) {
	dirs := TrustedDirs("/var/lib/ci-etc:relative:/")
	if len(dirs) != 2 || dirs[1] != "/var/lib/ci-etc" {
		t.Fatalf("trusted dirs %v", dirs)
	}
	for _, p := range []string{"/var/lib/containerd/snapshots/7/fs/evil/config.toml", "/etc/gensee/../../tmp/config.toml", "/etc/gensee-evil/config.toml"} {
		if _, err := LoadForTask(p, dirs); err == nil || !strings.Contains(err.Error(), "outside the directories") {
			t.Errorf("%s: %v, want a refusal", p, err)
		}
	}
}
