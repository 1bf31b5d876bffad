package gate

import (
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestFailUnclaimed: with FailUnclaimed a change outside every product and
// exclusion fails the gate (one unclaimed_change anomaly per change) while
// the product itself still passes and is staged; excluded names and a
// clean run do not count.
func TestFailUnclaimed(t *testing.T) {
	result := spec.Product{Class: spec.ClassStructuredResult, Slot: "out/result.json"}
	cases := []struct {
		name   string
		strict bool
		extra  []string // files written besides the product
		want   []string // unclaimed_change paths
	}{
		{"count is the default", false, []string{"ws/stray"}, nil},
		{"only the product", true, nil, nil},
		{"excluded names", true, []string{"ws/node_modules/x", "ws/.git/HEAD"}, nil},
		{"stray in the workspace", true, []string{"ws/stray"}, []string{"/ws/stray"}},
		{"outside the workspace", true, []string{"etc/passwd", "ws/b"}, []string{"/etc", "/etc/passwd", "/ws/b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			start := time.Now().Add(-time.Second)
			mkdirAll(t, root, "ws")
			writeFile(t, root, "ws/out/result.json", `{"ok":true}`, 0o644)
			for _, f := range tc.extra {
				writeFile(t, root, f, "x", 0o644)
			}
			in := bindInput(t, root, start, result)
			in.FailUnclaimed = tc.strict
			res := runGate(t, in)
			requirePass(t, res, "out/result.json")
			var got []string
			for _, a := range res.Anomalies {
				if a.Rule == RuleUnclaimedChange {
					got = append(got, a.Path)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("unclaimed_change anomalies %v, want %v (unclaimed %+v)", got, tc.want, res.Unclaimed)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("unclaimed_change anomalies %v, want %v", got, tc.want)
				}
			}
			wantVerdict := Pass
			if len(tc.want) > 0 {
				wantVerdict = Fail
			}
			if res.Verdict != wantVerdict {
				t.Fatalf("verdict %s, want %s (anomalies %+v)", res.Verdict, wantVerdict, res.Anomalies)
			}
		})
	}
}
