package specpolicy

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

func TestSeccompHolds(t *testing.T) {
	merged, _, err := MergeSeccomp(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := SeccompHolds(merged, "fix"); err != nil {
		t.Fatalf("the merged profile does not hold: %v", err)
	}
	strict, _, err := MergeSeccomp(&specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86},
		Syscalls: []specs.LinuxSyscall{{Names: []string{"read", "socket"}, Action: specs.ActAllow}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := SeccompHolds(strict, "fix"); err != nil {
		t.Fatalf("a merged default-deny profile does not hold: %v", err)
	}
	eq := specs.LinuxSeccompArg{Index: 0, Value: 17, Op: specs.OpEqualTo}
	for name, p := range map[string]*specs.LinuxSeccomp{
		"none":          nil,
		"default allow": {DefaultAction: specs.ActAllow},
		"64-bit equal":  {DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Names: []string{"socket"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{eq}}}},
		"allow socket":  {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{"socket"}, Action: specs.ActAllow}}},
		"x86 with socket": func() *specs.LinuxSeccomp {
			p := *strict
			p.Architectures = append(append([]specs.Arch{}, p.Architectures...), specs.ArchX86)
			return &p
		}(),
		"allow by type": {DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{"socket"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: 3, Op: specs.OpEqualTo}}}}},
	} {
		err := SeccompHolds(p, "fix")
		var rf *spec.Refusal
		if !errors.As(err, &rf) || (rf.Reason != RuleSeccompWeaker && rf.Reason != RuleSeccompProfile) {
			t.Errorf("%s: want a refusal, got %v", name, err)
		}
	}
}
