package admission

import (
	"testing"

	"github.com/gensee/gensee/spec"
)

// TestMatchUser: a selector's user matches the host command's invoking
// user by login name or decimal uid, and never a container (no user fact).
func TestMatchUser(t *testing.T) {
	alice := &User{UID: 1000, Name: "alice"}
	nameless := &User{UID: 1234}
	cases := []struct {
		name  string
		match spec.SelectorMatch
		facts Facts
		want  bool
	}{
		{"by name", spec.SelectorMatch{Runtime: "host", User: "alice"}, Facts{Runtime: "host", User: alice}, true},
		{"by uid", spec.SelectorMatch{Runtime: "host", User: "1000"}, Facts{Runtime: "host", User: alice}, true},
		{"user alone", spec.SelectorMatch{User: "alice"}, Facts{Runtime: "host", User: alice}, true},
		{"other user", spec.SelectorMatch{Runtime: "host", User: "bob"}, Facts{Runtime: "host", User: alice}, false},
		{"other uid", spec.SelectorMatch{Runtime: "host", User: "1001"}, Facts{Runtime: "host", User: alice}, false},
		{"nameless by uid", spec.SelectorMatch{User: "1234"}, Facts{Runtime: "host", User: nameless}, true},
		{"nameless never by empty name", spec.SelectorMatch{Runtime: "host", User: ""}, Facts{Runtime: "host", User: nameless}, true},
		{"container has no user", spec.SelectorMatch{User: "0"}, Facts{ContainerdNamespace: "default", Runtime: "io.containerd.gensee.v2"}, false},
		{"runtime differs", spec.SelectorMatch{Runtime: "host", User: "alice"}, Facts{Runtime: "io.containerd.gensee.v2", User: alice}, false},
		{"host selector without user matches any user", spec.SelectorMatch{Runtime: "host"}, Facts{Runtime: "host", User: alice}, true},
	}
	for _, c := range cases {
		if got := matches(c.match, c.facts); got != c.want {
			t.Errorf("%s: matches(%+v, %+v) = %v, want %v", c.name, c.match, c.facts, got, c.want)
		}
	}
	if d := describeFacts(Facts{Runtime: "host", User: alice}); d != `runtime "host", user "alice" (uid 1000)` {
		t.Errorf("describeFacts = %s", d)
	}
}
