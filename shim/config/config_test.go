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
