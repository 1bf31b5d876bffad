package reference

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gensee/gensee/spec"
)

// matchRules returns, per class, the highest confidence of the rules that
// match the request, and the ids of those rules. When no rule matches but
// one would have, were it not for an environment variable that makes the
// executable load or run other code and that the rule does not pin,
// unpinned names that variable.
func (a *Analyzer) matchRules(req *spec.AnalyzerRequest) (scores map[string]int, ids []string, unpinned string) {
	scores = map[string]int{}
	for i := range a.rules.Rules {
		r := &a.rules.Rules[i]
		if !ruleMatches(r, req) {
			continue
		}
		if name := unpinnedEnv(r, req.Command.Env); name != "" {
			if unpinned == "" {
				unpinned = fmt.Sprintf("the command's environment sets %s, which rule %s does not pin (env): it can make the executable load or run other code", name, r.ID)
			}
			continue
		}
		ids = append(ids, r.ID)
		if bp, ok := scores[r.Class]; !ok || r.ConfidenceBP > bp {
			scores[r.Class] = r.ConfidenceBP
		}
	}
	if len(ids) > 0 {
		unpinned = ""
	}
	return scores, ids, unpinned
}

// ruleMatches reports whether every field r sets matches the request: the
// observation's executable, the command's args and env, the image claimed.
func ruleMatches(r *spec.AnalyzerRule, req *spec.AnalyzerRequest) bool {
	if !slices.Contains(r.ExecutableSHA256, req.Observation.ExecutableSHA256) {
		return false // a validated rule always has an executable set
	}
	if len(r.Argv) > 0 && !spec.MatchArgv(r.Argv, req.Command.Args) {
		return false
	}
	if len(r.Image) > 0 && !slices.Contains(r.Image, req.Image) {
		return false
	}
	for _, e := range r.Env {
		if !slices.Contains(req.Command.Env, e) {
			return false
		}
	}
	return true
}

// unpinnedEnv names the first variable of env that spec.ProtectedEnv
// protects, other than PATH (a rule's argv and executable already say
// what runs), whose exact entry r's Env does not pin; "" when none.
func unpinnedEnv(r *spec.AnalyzerRule, env []string) string {
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if name != "PATH" && spec.ProtectedEnv(name) && !slices.Contains(r.Env, e) {
			return name
		}
	}
	return ""
}
