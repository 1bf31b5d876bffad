package reference

import (
	"slices"

	"github.com/gensee/gensee/spec"
)

// matchRules returns, per class, the highest confidence of the rules that
// match the request, and the ids of those rules.
func (a *Analyzer) matchRules(req *spec.AnalyzerRequest) (map[string]int, []string) {
	scores := map[string]int{}
	var ids []string
	for i := range a.rules.Rules {
		r := &a.rules.Rules[i]
		if !ruleMatches(r, req) {
			continue
		}
		ids = append(ids, r.ID)
		if bp, ok := scores[r.Class]; !ok || r.ConfidenceBP > bp {
			scores[r.Class] = r.ConfidenceBP
		}
	}
	return scores, ids
}

// ruleMatches reports whether every field r sets matches the request: the
// observation's executable, the command's args, the image claimed.
func ruleMatches(r *spec.AnalyzerRule, req *spec.AnalyzerRequest) bool {
	if len(r.ExecutableSHA256) > 0 && !slices.Contains(r.ExecutableSHA256, req.Observation.ExecutableSHA256) {
		return false
	}
	if len(r.Argv) > 0 && !spec.MatchArgv(r.Argv, req.Command.Args) {
		return false
	}
	if len(r.Image) > 0 && !slices.Contains(r.Image, req.Image) {
		return false
	}
	return true
}
