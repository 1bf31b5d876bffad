package config

import (
	"errors"
	"strings"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
)

func TestRuncOptionsPinOperatorFields(t *testing.T) {
	cfg := Default()
	cfg.Runc = RuncOptions{BinaryName: "/usr/local/sbin/runc", Root: "/run/gensee-runc", SystemdCgroup: true}
	for _, tc := range []struct {
		name  string
		rt    Runtime
		field string
	}{
		{"another binary", Runtime{Runc: &runcoptions.Options{BinaryName: "/tmp/evil"}}, "BinaryName"},
		{"another root", Runtime{Runc: &runcoptions.Options{Root: "/tmp/state"}}, "Root"},
		{"no pivot_root", Runtime{Runc: &runcoptions.Options{NoPivotRoot: true}}, "NoPivotRoot"},
		{"CRI body with a binary", Runtime{Body: &RuncOptions{BinaryName: "/tmp/evil"}}, "BinaryName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.rt.RuncOptions(cfg)
			var or *OptionRefusal
			if !errors.As(err, &or) || or.Field != tc.field {
				t.Fatalf("err = %v, want a refusal of %s", err, tc.field)
			}
		})
	}
	// Repeating the operator's values, or leaving them out, gets the operator's.
	o, err := Runtime{Runc: &runcoptions.Options{BinaryName: "/usr/local/sbin/runc", IoUid: 7}}.RuncOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.BinaryName != cfg.Runc.BinaryName || o.Root != cfg.Runc.Root || o.IoUid != 7 {
		t.Errorf("options %+v", o)
	}
	o, err = Runtime{}.RuncOptions(cfg)
	if err != nil || o.BinaryName != cfg.Runc.BinaryName || !o.SystemdCgroup {
		t.Errorf("operator options: %+v %v", o, err)
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
