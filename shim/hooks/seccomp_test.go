package hooks

import (
	"bytes"
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/specpolicy"
)

// TestSeccompProfileDefault: without a base the profile handed to the
// operator is RuntimeDefault merged, as the shim gives a spec without one,
// not a default-allow profile (unshare -U -r would hold every capability
// over new namespaces).
func TestSeccompProfileDefault(t *testing.T) {
	b, err := SeccompProfile(bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	var p specs.LinuxSeccomp
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	want, _, err := specpolicy.MergeSeccomp(specpolicy.RuntimeDefault())
	if err != nil {
		t.Fatal(err)
	}
	wb, _ := json.MarshalIndent(want, "", "  ")
	if !bytes.Equal(b, wb) {
		t.Error("the profile without a base is not RuntimeDefault's merge")
	}
	if p.DefaultAction == specs.ActAllow {
		t.Errorf("default action %s", p.DefaultAction)
	}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			if (n == "unshare" || n == "setns" || n == "mount") && r.Action == specs.ActAllow && len(r.Args) == 0 {
				t.Errorf("%s allowed unconditionally", n)
			}
		}
	}
}
