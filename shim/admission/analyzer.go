package admission

import (
	"fmt"

	"github.com/gensee/gensee/spec"
)

// stabilize returns obs with the selector's volatile env left out of its
// command digest (spec.StableEnv; docs/design.md §3.2), and the command
// that digest now covers: cmd must be what obs.CommandDigest covers. With
// no volatile entries, obs and cmd are returned unchanged.
func stabilize(obs spec.Observation, cmd spec.Command, volatile []string) (spec.Observation, spec.Command, *failure) {
	if len(volatile) == 0 {
		return obs, cmd, nil
	}
	if got, err := cmd.Digest(); err != nil || got != obs.CommandDigest {
		return obs, cmd, fail(ReasonObservationInvalid, "the selector lists volatile_env, but the runtime's command does not match the observation's command_digest",
			"report this bug (the front door passed no command, or another one)")
	}
	kept, left := spec.StableEnv(cmd.Env, volatile)
	stable := spec.Command{Args: cmd.Args, Env: kept, Cwd: cmd.Cwd}
	digest, err := stable.Digest()
	if err != nil {
		return obs, cmd, fail(ReasonObservationInvalid, "digest of the stable command: "+err.Error(), "report this bug")
	}
	obs.CommandDigest, obs.VolatileEnv = digest, left
	return obs, stable, nil
}

// NeedsAnalyzer reports whether Decide would ask an analyzer for a caller
// with facts f that attached no inference: one selector matches, and it
// names an analyzer. A door whose observation is still partial completes
// it first.
func NeedsAnalyzer(cat *spec.Catalog, f Facts) bool {
	if cat == nil {
		return false
	}
	sel, fl := selectorFor(cat, f)
	return fl == nil && sel.Analyzer != nil
}

// consult asks the selector's analyzer (in.Ask) about the stable
// observation obs of the stable command cmd; the observation must be
// complete.
func consult(ask Asker, sel *spec.Selector, obs spec.Observation, digest string, cmd spec.Command) ([]byte, *spec.AnalyzerConsult) {
	if obs.ExecutableSHA256 == "" {
		c := spec.AnalyzerConsult{Analyzer: sel.Analyzer.ID, Endpoint: sel.Analyzer.Endpoint, Outcome: spec.ConsultMalformed,
			Detail: "not asked: the observation has no executable hash"}
		return nil, &c
	}
	env, c := ask(sel, obs, digest, cmd)
	c.Analyzer, c.Endpoint = sel.Analyzer.ID, sel.Analyzer.Endpoint
	if len(env) > 0 && c.Outcome == "" {
		c.Outcome = spec.ConsultAnswered
	}
	if len(env) == 0 && (c.Outcome == "" || c.Outcome == spec.ConsultAnswered) {
		c.Outcome, c.Detail = spec.ConsultMalformed, "the answer carries neither an inference nor a reason"
	}
	return env, &c
}

// unanswered is the failure of a consult that brought no inference.
func unanswered(sel *spec.Selector, c *spec.AnalyzerConsult) *failure {
	fix := fmt.Sprintf("check the analyzer at %s (gensee analyzer serve; its log), or give selector %q a safe_default", c.Endpoint, sel.ID)
	if c.Outcome == spec.ConsultNoClass {
		return fail(ReasonAnalyzerNoClass, fmt.Sprintf("no inference attached, and analyzer %s names no class: %s", c.Analyzer, c.Detail),
			fmt.Sprintf("add a rule for this observation to the analyzer's signed rules, or give selector %q a safe_default", sel.ID))
	}
	what := fmt.Sprintf("no inference attached, and analyzer %s at %s gave none (%s", c.Analyzer, c.Endpoint, c.Outcome)
	if c.Detail != "" {
		what += ": " + c.Detail
	}
	return fail(ReasonAnalyzerUnavailable, what+")", fix)
}

// rejected marks a consult whose inference failed verification, and says
// in f that the inference came from the analyzer.
func rejected(c *spec.AnalyzerConsult, f *failure) *failure {
	if c == nil || f == nil {
		return f
	}
	c.Outcome, c.Detail = spec.ConsultRejected, string(f.reason)
	g := *f
	g.what = fmt.Sprintf("analyzer %s's answer from %s: %s", c.Analyzer, c.Endpoint, f.what)
	return &g
}
