package specpolicy

import (
	"fmt"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RuleSeccompWeaker refuses a spec whose seccomp profile does not already refuse
// what the merge would add, where the spec cannot be edited (an OCI hook).
const RuleSeccompWeaker = "seccomp_weaker"

// MergeSeccomp returns the profile CheckSpec would give a spec whose profile is old
// (nil: a default-allow one), and what it refused. It never modifies old. Front doors
// that cannot edit the spec (OCI hooks) hand this profile to the operator instead.
func MergeSeccomp(old *specs.LinuxSeccomp) (*specs.LinuxSeccomp, Seccomp, error) {
	return mergeSeccomp(old)
}

// SeccompHolds reports whether profile p, left as it is, already refuses everything the
// merge adds: socket(2) of every family outside the allowlist and of
// AF_NETLINK with every protocol outside allowedNetlink, whatever the high word of the family and whatever the
// type, io_uring_* and socketcall; and no 32-bit x86 ABI while any socket is allowed.
// It decides conservatively: a condition it cannot evaluate may or may not match, so an
// allowing rule with one counts as allowing, and a refusing rule with one does not count
// as refusing. The error is a *spec.Refusal; when the profile is weaker, its Fix is fix
// (the profile to use).
func SeccompHolds(p *specs.LinuxSeccomp, fix string) error {
	const field = "linux.seccomp"
	weaker := func(format string, args ...any) error {
		rf := refuse(RuleSeccompWeaker, field, format, args...)
		rf.Fix = fix
		return rf
	}
	if p == nil {
		return weaker("the container runs without a seccomp profile, so AF_PACKET, AF_VSOCK and the other socket families nftables cannot see stay open, and this front door cannot add one")
	}
	if err := checkProfile(p); err != nil {
		return err
	}
	def := actionOf(p.DefaultAction, p.DefaultErrnoRet)
	for _, f := range refusedFamilies {
		if ok, why := refusesSocket(p, def, f.af, nil); !ok {
			return weaker("the seccomp profile does not refuse socket(%s): %s", f.name, why)
		}
	}
	for q := uint64(0); q < netlinkMaxLinks; q++ {
		if slices.Contains(allowedNetlink, q) {
			continue
		}
		if ok, why := refusesSocket(p, def, afNetlink, &q); !ok {
			return weaker("the seccomp profile does not refuse socket(AF_NETLINK, protocol %d): %s", q, why)
		}
	}
	for _, name := range refusedSyscalls {
		if ok, why := refusesCall(p, def, name, nil); !ok {
			return weaker("the seccomp profile does not refuse %s: %s", name, why)
		}
	}
	if slices.Contains(p.Architectures, specs.ArchX86) && allowsSocket(p.Syscalls) {
		return weaker("the seccomp profile lists SCMP_ARCH_X86 and allows socket(2), which libseccomp maps onto socketcall(2) without its arguments there")
	}
	return nil
}

// refusesSocket: every socket(af|hi, type, proto) call is refused, for a zero and a set
// high word of the family (a 64-bit comparison is bypassed by a high bit the kernel
// ignores), for the given protocol or, when nil, every protocol below netlinkMaxLinks.
func refusesSocket(p *specs.LinuxSeccomp, def action, af uint64, proto *uint64) (bool, string) {
	protos := []uint64{}
	if proto != nil {
		protos = append(protos, *proto)
	} else {
		for q := uint64(0); q < netlinkMaxLinks; q++ {
			protos = append(protos, q)
		}
	}
	for _, hi := range []uint64{0, 1 << 32} {
		for _, q := range protos {
			if ok, why := refusesCall(p, def, "socket", map[uint]uint64{0: af | hi, 2: q}); !ok {
				return false, why
			}
		}
	}
	return true, ""
}

// refusesCall evaluates the rules of syscall name for the argument values given (an
// argument not given can take any value).
func refusesCall(p *specs.LinuxSeccomp, def action, name string, args map[uint]uint64) (bool, string) {
	sure := false
	for i, sc := range p.Syscalls {
		if !slices.Contains(sc.Names, name) {
			continue
		}
		a := actionOf(sc.Action, sc.ErrnoRet)
		if a == def {
			continue // runc drops rules whose action is the default
		}
		m := ruleMatches(sc.Args, args)
		if m == never {
			continue
		}
		if allowing(a.act) {
			return false, fmt.Sprintf("syscalls[%d] allows it (%s)", i, sc.Action)
		}
		if m == always {
			sure = true
		}
	}
	if sure || !allowing(def.act) {
		return true, ""
	}
	return false, fmt.Sprintf("no rule refuses it and the default action is %s", p.DefaultAction)
}

var knownOps = []specs.LinuxSeccompOperator{specs.OpEqualTo, specs.OpNotEqual, specs.OpLessThan,
	specs.OpLessEqual, specs.OpGreaterThan, specs.OpGreaterEqual, specs.OpMaskedEqual}

type match int

const (
	never match = iota
	maybe
	always
)

// ruleMatches applies runc's reading of a rule's conditions: conditions on the same
// argument are OR'd (runc splits them into rules), different arguments AND'd.
func ruleMatches(conds []specs.LinuxSeccompArg, args map[uint]uint64) match {
	byArg := map[uint][]specs.LinuxSeccompArg{}
	for _, c := range conds {
		byArg[c.Index] = append(byArg[c.Index], c)
	}
	out := always
	for idx, cs := range byArg {
		v, known := args[idx]
		if !known {
			out = maybe
			continue
		}
		hit, unsure := false, false
		for _, c := range cs {
			switch {
			case !slices.Contains(knownOps, c.Op):
				unsure = true
			case compare(c, v):
				hit = true
			}
		}
		switch {
		case hit:
		case unsure:
			out = maybe
		default:
			return never
		}
	}
	return out
}
