package promote

import "fmt"

// Rules a promotion is refused under (Refusal.Rule).
const (
	RuleNotRoot          = "not_root"
	RuleNoRoots          = "no_promotion_roots"
	RuleOutsideRoots     = "destination_outside_roots"
	RuleDestParent       = "destination_parent"
	RuleDestWritable     = "destination_parent_writable"
	RuleDestExists       = "destination_exists"
	RuleTrust            = "trust"
	RuleReceiptFormat    = "receipt_format"
	RuleReceiptSignature = "receipt_signature"
	RuleVerifierClass    = "verifier_class"
	RuleReceiptExpired   = "receipt_expired"
	RuleReceiptEarly     = "receipt_not_yet_valid"
	RuleReceiptLifetime  = "receipt_lifetime"
	RuleReceiptVerdict   = "receipt_verdict"
	RuleReceiptBinding   = "receipt_binding"
	RuleManifest         = "manifest"
	RuleProduct          = "product_not_staged"
	RuleStagedMismatch   = "staged_mismatch"
	RuleOpenFinding      = "open_finding"
	RuleExecutable       = "executable_without_consumer"
	RuleConsumer         = "consumer_unknown"
	RuleCopyMismatch     = "copy_mismatch"
)

// Refusal is a promotion refused: the rule, what failed, and the fix.
// Nothing was written at the destination when one is returned.
type Refusal struct {
	Rule    string
	Message string
	Fix     string
}

// RefusalPrefix starts every refusal's Error.
const RefusalPrefix = "promotion refused: "

func (r *Refusal) Error() string {
	s := RefusalPrefix + r.Rule + ": " + r.Message
	if r.Fix != "" {
		s += "; " + r.Fix
	}
	return s
}

func refuse(rule, fix, format string, args ...any) *Refusal {
	return &Refusal{Rule: rule, Message: fmt.Sprintf(format, args...), Fix: fix}
}
