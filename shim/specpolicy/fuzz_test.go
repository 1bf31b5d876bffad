package specpolicy

import (
	"encoding/json"
	"testing"
)

// FuzzCheckSpec: no input panics, and whatever is admitted holds no CAP_NET_RAW and a
// profile that refuses the boundary's families.
func FuzzCheckSpec(f *testing.F) {
	for _, s := range [][]byte{
		mustJSON(f, ctrDefaultSpec(f)), mustJSON(f, criSandboxSpec(f)), mustJSON(f, criContainerSpec(f)),
		[]byte(`{}`), []byte(`{"process":{"capabilities":{"ambient":["CAP_NET_RAW","CAP_NET_RAW"]}}}`),
		[]byte(`{"linux":{"seccomp":{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":40,"op":"SCMP_CMP_NE"}]}]}}}`),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSpec(data)
		if err != nil {
			return
		}
		if _, err := CheckSpec(s, Grants{Capabilities: []string{"CAP_SYS_NICE"}}, Operator{}); err != nil {
			return
		}
		assertNoNetRaw(t, s.Process)
		if s.Linux == nil || s.Linux.Seccomp == nil {
			t.Fatal("admitted without a seccomp profile")
		}
		for _, fam := range refusedFamilies {
			if a := evalSocket(t, s.Linux.Seccomp, fam.af, 0); a != eperm {
				t.Fatalf("admitted profile gives %s %v", fam.name, a)
			}
		}
	})
}

func mustJSON(f *testing.F, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
