package specpolicy

import (
	"slices"
	"testing"
)

// TestExportedSocketRule: the exported rule is seccomp.go's, and copies.
func TestExportedSocketRule(t *testing.T) {
	got := AllowedSocketFamilies()
	if !slices.Equal(got, allowedFamilies) {
		t.Fatalf("AllowedSocketFamilies = %v, want %v", got, allowedFamilies)
	}
	got[0] = 17
	if allowedFamilies[0] == 17 {
		t.Error("AllowedSocketFamilies hands out the rule itself")
	}
	if SocketFamilyName(AFNetlink) != "AF_NETLINK" || SocketFamilyName(afMax) != "" {
		t.Errorf("SocketFamilyName: %q %q", SocketFamilyName(AFNetlink), SocketFamilyName(afMax))
	}
	if !slices.Equal(RefusedSyscalls(), refusedSyscalls) {
		t.Errorf("RefusedSyscalls = %v", RefusedSyscalls())
	}
}
