package specpolicy

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/sockrule"
)

// The socket rule (families, AF_NETLINK protocols, refused syscalls) is
// shim/sockrule's, shared with host runs; these are its names here.
var (
	allowedFamilies = sockrule.AllowedSocketFamilies()
	familyNames     = sockrule.FamilyNames
	allowedNetlink  = sockrule.AllowedNetlinkProtocols()
	refusedSyscalls = sockrule.RefusedSyscalls()
)

// refusedFamilies are every family not in allowedFamilies, with its name.
var refusedFamilies = func() []struct {
	name string
	af   uint64
} {
	var out []struct {
		name string
		af   uint64
	}
	for af := uint64(0); af < afMax; af++ {
		if !slices.Contains(allowedFamilies, af) {
			out = append(out, struct {
				name string
				af   uint64
			}{familyNames[af], af})
		}
	}
	return out
}()

// refusedNetlinkRecord is how the records name the refused protocols.
var refusedNetlinkRecord = func() string {
	var names []string
	for _, p := range allowedNetlink {
		names = append(names, sockrule.NetlinkProtocolName(p))
	}
	return "AF_NETLINK protocols other than " + strings.Join(names, ", ") + " (so NETLINK_USERSOCK, NETLINK_NETFILTER)"
}()

const (
	afNetlink        = sockrule.AFNetlink
	netlinkNetfilter = sockrule.NetlinkNetfilter
	afMax            = sockrule.AFMax
	netlinkMaxLinks  = sockrule.NetlinkMaxLinks
	lowWord          = 0xffffffff
	errnoEPERM       = 1
)

// knownFlags are the seccomp flags runc v1.5 implements; none of them changes which rule
// applies. Any other flag is refused: we cannot say what it does to our rules.
var knownFlags = []specs.LinuxSeccompFlag{
	"SECCOMP_FILTER_FLAG_TSYNC",
	specs.LinuxSeccompFlagLog,
	specs.LinuxSeccompFlagSpecAllow,
	specs.LinuxSeccompFlagWaitKillableRecv,
}

// action is a seccomp action as runc resolves it: ERRNO and TRACE without errnoRet
// return EPERM, SCMP_ACT_KILL is KILL_THREAD, errnoRet of other actions is ignored.
type action struct {
	act   specs.LinuxSeccompAction
	errno uint
}

func actionOf(a specs.LinuxSeccompAction, ret *uint) action {
	switch a {
	case specs.ActErrno, specs.ActTrace:
		if ret == nil {
			return action{a, errnoEPERM}
		}
		return action{a, *ret}
	case specs.ActKill:
		return action{specs.ActKillThread, 0}
	}
	return action{a, 0}
}

func (a action) rule() (specs.LinuxSeccompAction, *uint) {
	switch a.act {
	case specs.ActErrno, specs.ActTrace:
		e := a.errno
		return a.act, &e
	}
	return a.act, nil
}

var eperm = action{specs.ActErrno, errnoEPERM}

// mergeSeccomp returns the profile that refuses the families and syscalls above and
// otherwise behaves as old does for every socket family this kernel has. It never
// modifies old. How, and why this way:
//
// libseccomp's precedence between overlapping rules with different actions for one
// syscall is not something to rely on, and runc splits several conditions on one
// argument into OR'd rules. So socket(2) and the refused syscalls are removed from every
// old rule, old's socket rules are evaluated exactly for each family (they must compare
// arg0 only; anything else is refused), and socket(2) is re-expressed as disjoint rules,
// one per family whose merged action differs from the default action: arg0 == family,
// and for AF_NETLINK one rule per span of protocols (arg2), so no two rules ever overlap.
//
// Every comparison is SCMP_CMP_MASKED_EQ on the low 32 bits: family and protocol are C
// ints, the kernel ignores the upper half of the register, and a plain 64-bit EQ deny
// rule is bypassed by setting a high bit (socket(0x100000011, ...) is AF_PACKET).
func mergeSeccomp(old *specs.LinuxSeccomp) (*specs.LinuxSeccomp, Seccomp, error) {
	var rec Seccomp
	for _, f := range refusedFamilies {
		rec.FamiliesRefused = append(rec.FamiliesRefused, f.name)
	}
	rec.FamiliesRefused = append(rec.FamiliesRefused, refusedNetlinkRecord)
	rec.SyscallsRefused = slices.Clone(refusedSyscalls)

	if old == nil {
		rec.Created = true
		old = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: nativeArches()}
	}
	if err := checkProfile(old); err != nil {
		return nil, rec, err
	}
	def := actionOf(old.DefaultAction, old.DefaultErrnoRet)
	famAction, err := socketActions(old, def)
	if err != nil {
		return nil, rec, err
	}

	merged := *old
	merged.Architectures = slices.Clone(old.Architectures)
	merged.Flags = slices.Clone(old.Flags)
	merged.Syscalls = nil
	drop := append([]string{"socket"}, refusedSyscalls...)
	for _, sc := range old.Syscalls {
		names := slices.DeleteFunc(slices.Clone(sc.Names), func(n string) bool { return slices.Contains(drop, n) })
		if len(names) == 0 {
			continue
		}
		sc.Names = names
		sc.Args = slices.Clone(sc.Args)
		merged.Syscalls = append(merged.Syscalls, sc)
	}

	refused := func(af uint64) bool {
		return slices.ContainsFunc(refusedFamilies, func(f struct {
			name string
			af   uint64
		}) bool {
			return f.af == af
		})
	}
	familyAction := func(af uint64) action {
		switch {
		case af == afNetlink:
			return def // its own rules, per protocol, below
		case refused(af):
			return eperm
		}
		return famAction[af]
	}
	for _, b := range spans(afMax, familyAction, def) {
		merged.Syscalls = append(merged.Syscalls, socketRule(b.a, b.span, nil))
	}
	netlinkAction := func(proto uint64) action {
		if !slices.Contains(allowedNetlink, proto) {
			return eperm
		}
		return famAction[afNetlink]
	}
	for _, b := range spans(netlinkMaxLinks, netlinkAction, def) {
		merged.Syscalls = append(merged.Syscalls, socketRule(b.a, span{afNetlink, 1}, &b.span))
	}
	act, ret := eperm.rule()
	merged.Syscalls = append(merged.Syscalls, specs.LinuxSyscall{Names: slices.Clone(refusedSyscalls), Action: act, ErrnoRet: ret})

	// On 32-bit x86 libseccomp also installs every socket rule on socketcall(2) as
	// "call == SYS_SOCKET", arguments dropped (they sit behind a pointer). An allowing
	// socket rule would so allow every family through socketcall, from 32-bit binaries
	// and from 64-bit ones via int $0x80 (root_test.go shows it with a 32-bit probe). The x86 ABI
	// then leaves the profile: its syscalls get the filter's bad-arch action (kill).
	if slices.Contains(merged.Architectures, specs.ArchX86) && allowsSocket(merged.Syscalls) {
		merged.Architectures = slices.DeleteFunc(merged.Architectures, func(a specs.Arch) bool { return a == specs.ArchX86 })
		rec.ArchitecturesRemoved = append(rec.ArchitecturesRemoved, string(specs.ArchX86))
	}
	return &merged, rec, nil
}

// allowsSocket: a rule allows some socket(2) call (a default action alone is
// not mapped onto socketcall: the refusing rules are, arguments dropped).
func allowsSocket(rules []specs.LinuxSyscall) bool {
	for _, r := range rules {
		if slices.Contains(r.Names, "socket") && allowing(r.Action) {
			return true
		}
	}
	return false
}

// allowing: the actions that let the call run.
func allowing(a specs.LinuxSeccompAction) bool {
	return a == specs.ActAllow || a == specs.ActLog || a == specs.ActTrace
}

// socketRule is socket(2) with a family in af (and, for AF_NETLINK, a
// protocol in proto) → a.
func socketRule(a action, af span, proto *span) specs.LinuxSyscall {
	act, ret := a.rule()
	args := []specs.LinuxSeccompArg{af.arg(0)}
	if proto != nil {
		args = append(args, proto.arg(2))
	}
	return specs.LinuxSyscall{Names: []string{"socket"}, Action: act, ErrnoRet: ret, Args: args}
}

// span is the values first … first+size-1 of an argument; size is a power of
// two and first a multiple of it.
type span struct{ first, size uint64 }

// arg matches the span on the low 32 bits of argument index:
// (arg & ^(size-1) & 0xffffffff) == first.
func (s span) arg(index uint) specs.LinuxSeccompArg {
	return specs.LinuxSeccompArg{Index: index, Value: lowWord &^ (s.size - 1), ValueTwo: s.first, Op: specs.OpMaskedEqual}
}

// actionSpan is a span whose values all get action a.
type actionSpan struct {
	span
	a action
}

// spans covers every value below n whose action differs from def, and no
// other, with disjoint spans of one action each: at each value the largest
// aligned span that fits below n and holds one action. One rule per span
// instead of per value: libseccomp compiles, and runc loads, each rule for
// every architecture of the profile, and the 43 one-family rules of a
// default-allow profile cost runc about 3 ms of CPU per container more
// than their 13 spans.
func spans(n uint64, act func(uint64) action, def action) []actionSpan {
	var out []actionSpan
	for v := uint64(0); v < n; {
		a := act(v)
		if a == def {
			v++
			continue
		}
		size := uint64(1)
		for v%(2*size) == 0 && v+2*size <= n && same(v+size, v+2*size, a, act) {
			size *= 2
		}
		out = append(out, actionSpan{span{v, size}, a})
		v += size
	}
	return out
}

// same: every value in [from, to) gets action a.
func same(from, to uint64, a action, act func(uint64) action) bool {
	for v := from; v < to; v++ {
		if act(v) != a {
			return false
		}
	}
	return true
}

var knownActions = []specs.LinuxSeccompAction{
	specs.ActKill, specs.ActKillProcess, specs.ActKillThread, specs.ActTrap, specs.ActErrno,
	specs.ActTrace, specs.ActAllow, specs.ActLog,
}

// checkProfile refuses what the merge cannot keep exact. A seccomp listener (and any
// SCMP_ACT_NOTIFY) hands syscalls to an agent outside the container that can emulate
// them or inject file descriptors (SECCOMP_IOCTL_NOTIF_ADDFD), e.g. an AF_PACKET socket
// made outside every rule.
func checkProfile(p *specs.LinuxSeccomp) error {
	if p.ListenerPath != "" {
		return refuse(RuleSeccompProfile, "linux.seccomp.listenerPath",
			"the seccomp profile hands syscalls to the agent at %s, which could create sockets outside the boundary; remove listenerPath and SCMP_ACT_NOTIFY rules", p.ListenerPath)
	}
	if !slices.Contains(knownActions, p.DefaultAction) {
		return refuse(RuleSeccompProfile, "linux.seccomp.defaultAction",
			"the seccomp profile's default action %q cannot be merged with the boundary's rules; use SCMP_ACT_ALLOW or SCMP_ACT_ERRNO", p.DefaultAction)
	}
	for i, f := range p.Flags {
		if !slices.Contains(knownFlags, f) {
			return refuse(RuleSeccompProfile, fmt.Sprintf("linux.seccomp.flags[%d]", i),
				"the seccomp profile sets flag %q, whose effect on the boundary's rules is unknown; remove it", f)
		}
	}
	for i, sc := range p.Syscalls {
		if !slices.Contains(knownActions, sc.Action) {
			return refuse(RuleSeccompProfile, fmt.Sprintf("linux.seccomp.syscalls[%d]", i),
				"seccomp rule %d has action %q, which cannot be merged with the boundary's rules; use an action other than SCMP_ACT_NOTIFY", i, sc.Action)
		}
	}
	return nil
}

// socketActions evaluates old's socket(2) rules for every family below afMax, as runc
// and libseccomp would apply them to a family in the low word with a zero high word.
func socketActions(p *specs.LinuxSeccomp, def action) ([afMax]action, error) {
	type rule struct {
		i    int
		a    action
		args []specs.LinuxSeccompArg
	}
	var rules []rule
	for i, sc := range p.Syscalls {
		if !slices.Contains(sc.Names, "socket") {
			continue
		}
		a := actionOf(sc.Action, sc.ErrnoRet)
		if a == def {
			continue // runc drops rules whose action is the default
		}
		for _, arg := range sc.Args {
			if arg.Index != 0 || !slices.Contains([]specs.LinuxSeccompOperator{
				specs.OpEqualTo, specs.OpNotEqual, specs.OpLessThan, specs.OpLessEqual,
				specs.OpGreaterThan, specs.OpGreaterEqual, specs.OpMaskedEqual}, arg.Op) {
				return [afMax]action{}, refuse(RuleSeccompProfile, fmt.Sprintf("linux.seccomp.syscalls[%d]", i),
					"seccomp rule %d conditions socket on argument %d with %s, which cannot be merged exactly with the boundary's family rules; condition socket on argument 0 (the family) only", i, arg.Index, arg.Op)
			}
		}
		rules = append(rules, rule{i, a, sc.Args})
	}
	var out [afMax]action
	for af := uint64(0); af < afMax; af++ {
		out[af] = def
		first := -1
		for _, r := range rules {
			if !matches(r.args, af) {
				continue
			}
			if first >= 0 && r.a != out[af] {
				return out, refuse(RuleSeccompProfile, fmt.Sprintf("linux.seccomp.syscalls[%d]", r.i),
					"seccomp rules %d and %d give socket family %d different actions, and libseccomp's precedence between them is not defined; give each family one action", first, r.i, af)
			}
			first, out[af] = r.i, r.a
		}
	}
	return out, nil
}

// matches applies runc's reading of one rule's conditions (all on argument 0 here):
// one condition is that condition; several on the same argument become separate rules,
// so any of them matches.
func matches(args []specs.LinuxSeccompArg, v uint64) bool {
	if len(args) == 0 {
		return true
	}
	for _, a := range args {
		if compare(a, v) {
			return true
		}
	}
	return false
}

func compare(a specs.LinuxSeccompArg, v uint64) bool {
	switch a.Op {
	case specs.OpEqualTo:
		return v == a.Value
	case specs.OpNotEqual:
		return v != a.Value
	case specs.OpLessThan:
		return v < a.Value
	case specs.OpLessEqual:
		return v <= a.Value
	case specs.OpGreaterThan:
		return v > a.Value
	case specs.OpGreaterEqual:
		return v >= a.Value
	case specs.OpMaskedEqual:
		return v&a.Value == a.ValueTwo
	}
	return false
}

// nativeArches mirrors containerd's contrib/seccomp arches() for a created profile.
func nativeArches() []specs.Arch {
	switch runtime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchARM, specs.ArchAARCH64}
	}
	return nil
}
