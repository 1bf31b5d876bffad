package reference

import (
	"errors"
	"strings"
)

// Rule names why the analyzer refused to start.
type Rule string

// Start refusals.
const (
	RuleUnknownAnalyzer Rule = "unknown_analyzer" // the catalog lists no analyzer with the id
	RuleNoRulesKey      Rule = "no_rules_key"     // the analyzer has no rules_key
	RuleRulesFile       Rule = "rules_file"       // the rules file cannot be read
	RuleRulesSignature  Rule = "rules_signature"  // the rules do not verify with rules_key
	RuleRulesAnalyzer   Rule = "rules_analyzer"   // the rules are for another analyzer
	RuleRulesWindow     Rule = "rules_window"     // the rules expired or are not yet valid
	RuleRulesScope      Rule = "rules_scope"      // a rule's class is outside the analyzer's classes
	RuleKeyFile         Rule = "key_file"         // the private key cannot be read or parsed
	RuleWrongKey        Rule = "wrong_key"        // the private key is not the analyzer's public_key
	RuleUnknownModel    Rule = "unknown_model"    // the model is not one of the analyzer's models
)

// ErrRefused matches (errors.Is) every *StartError.
var ErrRefused = errors.New("analyzer refused to start")

// StartError is a refusal to start: which rule, what was found, the fix.
type StartError struct {
	Rule    Rule
	Problem string
	Fix     string
	Err     error
}

func (e *StartError) Error() string {
	var b strings.Builder
	b.WriteString("analyzer refused to start (")
	b.WriteString(string(e.Rule))
	b.WriteString("): ")
	b.WriteString(e.Problem)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

func (e *StartError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRefused}
	}
	return []error{ErrRefused, e.Err}
}

func refuse(rule Rule, problem, fix string, err error) *StartError {
	return &StartError{Rule: rule, Problem: problem, Fix: fix, Err: err}
}
