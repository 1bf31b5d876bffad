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
			for _, q := range []uint64{netlinkNetfilter, 2 /* NETLINK_USERSOCK */} {
				if a := evalSocket(t, m, afNetlink, q); a != eperm {
					t.Errorf("netlink protocol %d -> %v", q, a)
				}
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

// TestMergeExactPerFamily: for every family below afMax and every netlink
// protocol, with the family's high word clear or set, the merged profile
// gives EPERM where the boundary refuses and the old profile's action
// elsewhere; families from afMax on keep the default action.
func TestMergeExactPerFamily(t *testing.T) {
	for _, old := range []*specs.LinuxSeccomp{nil, seccomp.DefaultProfile(ctrDefaultSpec(t)), {DefaultAction: specs.ActErrno, Architectures: nativeArches(), Syscalls: []specs.LinuxSyscall{
		{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 40, Op: specs.OpNotEqual}}}}}} {
		m, _, err := mergeSeccomp(old)
		if err != nil {
			t.Fatal(err)
		}
		base := old
		if base == nil {
			base = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow}
		}
		def := actionOf(base.DefaultAction, base.DefaultErrnoRet)
		was, err := socketActions(base, def)
		if err != nil {
			t.Fatal(err)
		}
		for _, hi := range []uint64{0, 1 << 32} {
			for af := uint64(0); af < afMax+20; af++ {
				protos := []uint64{0}
				if af == afNetlink {
					protos = nil
					for q := uint64(0); q < netlinkMaxLinks; q++ {
						protos = append(protos, q)
					}
				}
				for _, q := range protos {
					want := def
					switch {
					case af >= afMax:
					case af == afNetlink && !slices.Contains(allowedNetlink, q),
						slices.ContainsFunc(refusedFamilies, func(f struct {
							name string
							af   uint64
						}) bool {
							return f.af == af
						}):
						want = eperm
					default:
						want = was[af]
					}
					if got := evalSocket(t, m, af|hi, q); got != want {
						t.Errorf("old %v: socket(%#x, proto %d) -> %v, want %v", old != nil, af|hi, q, got, want)
					}
				}
			}
		}
	}
	m, _, _ := mergeSeccomp(nil)
	n := 0
	for _, sc := range m.Syscalls {
		if slices.Contains(sc.Names, "socket") {
			n++
		}
	}
	if n != 24 {
		t.Errorf("a created profile has %d socket rules, want 24 (13 family spans, 11 netlink protocol spans)", n)
	}
}

// TestSpans: spans are aligned powers of two, disjoint, of one action, and
// cover exactly the values whose action is not the default.
func TestSpans(t *testing.T) {
	def, a, b := action{specs.ActAllow, 0}, eperm, action{specs.ActErrno, 13}
	for seed := uint64(1); seed < 500; seed++ {
		n := 1 + seed%64
		acts := make([]action, n)
		x := seed
		for i := range acts {
			x = x*6364136223846793005 + 1442695040888963407
			acts[i] = []action{def, a, b}[(x>>33)%3]
		}
		got := make([]action, n)
		for i := range got {
			got[i] = def
		}
		covered := make([]bool, n)
		for _, s := range spans(n, func(v uint64) action { return acts[v] }, def) {
			if s.size == 0 || s.size&(s.size-1) != 0 || s.first%s.size != 0 || s.first+s.size > n || s.a == def {
				t.Fatalf("n %d: bad span %+v", n, s)
			}
			for v := s.first; v < s.first+s.size; v++ {
				if covered[v] {
					t.Fatalf("n %d: value %d in two spans", n, v)
				}
				covered[v], got[v] = true, s.a
			}
		}
		if !slices.Equal(got, acts) {
			t.Fatalf("n %d: spans give %v, want %v", n, got, acts)
		}
	}
}
