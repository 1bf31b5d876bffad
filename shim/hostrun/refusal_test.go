package hostrun

import (
	"testing"

	"github.com/gensee/gensee/spec"
)

// A host run's refusal names its field in the one line the command
// prints, whoever made it (refuse, or the engine's trust load and
// decision).
func TestRefusalNamesField(t *testing.T) {
	for _, tc := range []struct {
		rf    *Refusal
		field string
		want  string
	}{
		{refuse(ReasonWorkspace, "--workspace", "pass an existing directory", "open %s: no such file", "/w"), "", "--workspace: open /w: no such file"},
		{refuse(ReasonUser, "--user", "", "--user %s is uid 0", "root"), "", "--user root is uid 0"},
		{named(spec.Refuse("no_inference", "", "", "no annotation"), "--inference"), "--inference", "--inference: no annotation"},
		{named(spec.Refuse("catalog", "--catalog", "", "expired"), ""), "--catalog", "--catalog: expired"},
		{named(spec.Refuse("r", "", "", "m"), ""), "", "m"},
	} {
		if tc.rf.Message != tc.want || (tc.field != "" && tc.rf.Field != tc.field) {
			t.Errorf("refusal %+v, want message %q, field %q", tc.rf, tc.want, tc.field)
		}
	}
}
