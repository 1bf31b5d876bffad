package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// TestLandlockPlan: at each ABI, a right is either handled (and reported) or
// listed in Missing, never both; refer at ABI 1 is neither (denied outright).
func TestLandlockPlan(t *testing.T) {
	l := Landlock{ConnectTCP: []uint16{}, NoBindTCP: true, ScopeAbstractUnix: true, ScopeSignal: true}
	for abi := 0; abi <= 8; abi++ {
		p := l.plan(abi)
		a := p.applied
		handled := slices.Concat(a.FS, a.Net, a.Scoped)
		for _, r := range slices.Concat(fsRights, []right{netBindTCP, netConnectTCP, scopeAbstract, scopeSignal}) {
			isMissing := slices.ContainsFunc(a.Missing, func(m string) bool { return strings.HasPrefix(m, r.name+":") })
			isHandled := slices.Contains(handled, r.name)
			switch {
			case r.abi <= abi && (!isHandled || isMissing):
				t.Errorf("ABI %d: %s handled %v missing %v, want handled only", abi, r.name, isHandled, isMissing)
			case r.abi > abi && isHandled:
				t.Errorf("ABI %d: %s claimed though the ABI lacks it", abi, r.name)
			case r.abi > abi && !isMissing && !(r.name == "refer" && abi == 1):
				t.Errorf("ABI %d: %s neither handled nor missing", abi, r.name)
			}
		}
	}
	if p := (Landlock{}).plan(7); len(p.applied.Net) != 0 || len(p.applied.Scoped) != 0 || p.attr.handledNet != 0 || p.attr.scoped != 0 {
		t.Errorf("zero Landlock handles network or scopes: %+v", p)
	}
	if p := (Landlock{}).plan(7); p.attr.handledFS == 0 {
		t.Error("zero Landlock leaves the filesystem unhandled")
	}
}
