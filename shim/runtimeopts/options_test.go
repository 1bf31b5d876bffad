package runtimeopts

import (
	"errors"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"

	"github.com/gensee/gensee/shim/config"
)

func TestRuncOptionsPinOperatorFields(t *testing.T) {
	cfg := config.Default()
	cfg.Runc = config.RuncOptions{BinaryName: "/usr/local/sbin/runc", Root: "/run/gensee-runc", SystemdCgroup: true}
	for _, tc := range []struct {
		name  string
		rt    Runtime
		field string
	}{
		{"another binary", Runtime{Runc: &runcoptions.Options{BinaryName: "/tmp/evil"}}, "BinaryName"},
		{"another root", Runtime{Runc: &runcoptions.Options{Root: "/tmp/state"}}, "Root"},
		{"no pivot_root", Runtime{Runc: &runcoptions.Options{NoPivotRoot: true}}, "NoPivotRoot"},
		{"CRI body with a binary", Runtime{Body: &config.RuncOptions{BinaryName: "/tmp/evil"}}, "BinaryName"},
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
