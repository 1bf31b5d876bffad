package spec

import "testing"

func TestValidUser(t *testing.T) {
	for s, want := range map[string]bool{
		"alice": true, "_ci": true, "build-bot": true, "host$": true, "a1": true,
		"0": true, "1000": true, "4294967294": true,
		"": false, "Alice": false, "1abc": false, "-x": false, "a b": false,
		"01000": false, "+1": false, "-1": false, "4294967295": false, "99999999999": false,
		"abcdefghijabcdefghijabcdefghijabc": false,
	} {
		if got := ValidUser(s); got != want {
			t.Errorf("ValidUser(%q) = %v, want %v", s, got, want)
		}
	}
}
