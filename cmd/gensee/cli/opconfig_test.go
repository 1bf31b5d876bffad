package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gensee/gensee/shim/config"
)

func TestConfigPath(t *testing.T) {
	wd, _ := os.Getwd()
	cases := []struct {
		name, flag, env, want string
		explicit              bool
	}{
		{"flag wins", "/etc/a.toml", "/etc/b.toml", "/etc/a.toml", true},
		{"env next", "", "/etc/b.toml", "/etc/b.toml", true},
		{"default last", "", "", config.DefaultPath, false},
		{"relative flag made absolute", "x.toml", "", filepath.Join(wd, "x.toml"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, explicit, err := ConfigPath(tc.flag, func(k string) string {
				if k == config.EnvConfig {
					return tc.env
				}
				return ""
			})
			if err != nil || got != tc.want || explicit != tc.explicit {
				t.Errorf("ConfigPath = %q, %v, %v; want %q, %v", got, explicit, err, tc.want, tc.explicit)
			}
		})
	}
}

func TestOperatorConfig(t *testing.T) {
	env := &Env{Getenv: func(string) string { return "" }}
	// A named file that does not exist is an error (exit 2), never defaults.
	_, err := env.operatorConfig(filepath.Join(t.TempDir(), "missing.toml"))
	if ExitCode(err) != ExitUsage {
		t.Errorf("missing explicit config: exit %d (%v), want 2", ExitCode(err), err)
	}
	// A file group/other can write is refused (exit 1).
	if os.Geteuid() == 0 {
		p := writeFile(t, t.TempDir(), "c.toml", "state_dir = \"/var/lib/gensee\"\n")
		os.Chmod(p, 0o666)
		if _, err := env.operatorConfig(p); ExitCode(err) != ExitRefused {
			t.Errorf("writable config: exit %d (%v), want 1", ExitCode(err), err)
		}
		os.Chmod(p, 0o644)
		cfg, err := env.operatorConfig(p)
		if err != nil || cfg.Path != p {
			t.Errorf("root-owned config: %+v, %v", cfg, err)
		}
	}
}
