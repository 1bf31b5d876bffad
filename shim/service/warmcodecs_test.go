package service

import (
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// warmCodecs runs to its end on the types it names, and leaves the codecs
// working: a spec still round-trips.
func TestWarmCodecs(t *testing.T) {
	warmCodecs()
	in := specs.Spec{Version: "1.2.0", Process: &specs.Process{Args: []string{"/bin/true"}}, Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}}}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out specs.Spec
	if err := json.Unmarshal(b, &out); err != nil || out.Process.Args[0] != "/bin/true" || out.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Fatalf("round trip after warmCodecs: %+v, %v", out, err)
	}
}
