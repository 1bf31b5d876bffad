package specpolicy

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// evalSocket is the merged profile's socket(2) result as runc would build it, given
// that the merge only ever emits disjoint rules.
func evalSocket(t *testing.T, p *specs.LinuxSeccomp, af, proto uint64) action {
	t.Helper()
	var hit []action
	for _, sc := range p.Syscalls {
		if !slices.Contains(sc.Names, "socket") {
			continue
		}
		ok := true
		for _, a := range sc.Args {
			v := af
			if a.Index == 2 {
				v = proto
			}
			ok = ok && compare(a, v)
		}
		if ok {
			hit = append(hit, actionOf(sc.Action, sc.ErrnoRet))
		}
	}
	if len(hit) > 1 {
		t.Fatalf("family %d proto %d matched %d socket rules", af, proto, len(hit))
	}
	if len(hit) == 1 {
		return hit[0]
	}
	return actionOf(p.DefaultAction, p.DefaultErrnoRet)
}

func TestMergeSeccomp(t *testing.T) {
	def := seccomp.DefaultProfile(ctrDefaultSpec(t))
	allow := action{specs.ActAllow, 0}
	cases := []struct {
		name    string
		old     *specs.LinuxSeccomp
		created bool
		inet    action // AF_INET's merged action
		vsock   action
		x86     bool
	}{
		{"none", nil, true, allow, eperm, true},
		{"containerd_default", def, false, allow, eperm, false},
		{"docker_ne_vsock", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: nativeArches(), Syscalls: []specs.LinuxSyscall{
			{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 40, Op: specs.OpNotEqual}}}}}, false, allow, eperm, false},
		{"errno_default_no_socket", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: nativeArches()}, false, eperm, eperm, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before []byte
			if tc.old != nil {
				before, _ = json.Marshal(tc.old)
			}
			m, rec, err := mergeSeccomp(tc.old)
			if err != nil {
				t.Fatal(err)
			}
			if tc.old != nil {
				if after, _ := json.Marshal(tc.old); string(after) != string(before) {
					t.Error("merge modified the old profile")
				}
			}
			if rec.Created != tc.created {
				t.Errorf("created %v", rec.Created)
			}
			for _, f := range refusedFamilies {
				if a := evalSocket(t, m, f.af, 0); a != eperm {
					t.Errorf("%s -> %v", f.name, a)
				}
			}
			if a := evalSocket(t, m, afNetlink, netlinkNetfilter); a != eperm {
				t.Errorf("NETLINK_NETFILTER -> %v", a)
			}
			if a := evalSocket(t, m, 2, 0); a != tc.inet {
				t.Errorf("AF_INET -> %v want %v", a, tc.inet)
			}
			if a := evalSocket(t, m, afNetlink, 0); a != tc.inet {
				t.Errorf("NETLINK_ROUTE -> %v want %v", a, tc.inet)
			}
			if a := evalSocket(t, m, 40, 0); a != tc.vsock {
				t.Errorf("AF_VSOCK -> %v", a)
			}
			if got := slices.Contains(m.Architectures, specs.ArchX86); got != tc.x86 && len(nativeArches()) > 0 && nativeArches()[0] == specs.ArchX86_64 {
				t.Errorf("x86 kept %v want %v", got, tc.x86)
			}
			for _, sc := range m.Syscalls {
				for _, n := range refusedSyscalls {
					if slices.Contains(sc.Names, n) && (sc.Action != specs.ActErrno || len(sc.Args) != 0) {
						t.Errorf("%s left in rule %+v", n, sc)
					}
				}
			}
		})
	}
}

// TestMergeKeepsOldFamilyPolicy: the containerd default refuses AF_ALG; so must the merge.
func TestMergeKeepsOldFamilyPolicy(t *testing.T) {
	m, _, err := mergeSeccomp(seccomp.DefaultProfile(ctrDefaultSpec(t)))
	if err != nil {
		t.Fatal(err)
	}
	if a := evalSocket(t, m, 38, 0); a.act != specs.ActErrno {
		t.Errorf("AF_ALG -> %v", a)
	}
}
