package promote

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/shim/verify"
	"github.com/gensee/gensee/spec"
)

// The pure checks of a promotion, in the order Promote applies them. Each
// returns nil or the refusal; none touches a file or a clock of its own.

// Target is where a product goes: below Root (an operator's promotion
// root, as configured) at Rel, a clean '/'-separated path with at least
// one component.
type Target struct {
	Root string
	Rel  string
}

// Dest is the target's absolute path.
func (t Target) Dest() string { return path.Join(t.Root, t.Rel) }

// CheckRoot refuses a promoter that is not root: the records are root's,
// and so is every write below a promotion root.
func CheckRoot(euid int) *Refusal {
	if euid != 0 {
		return refuse(RuleNotRoot, "run it as root (sudo gensee promote ...)",
			"gensee promote runs as uid %d; it reads root's operation records and writes below the operator's promotion roots", euid)
	}
	return nil
}

// CheckDestination places dest (absolute and clean, as the operator named
// it) strictly below one of roots (promotion_roots of the operator
// config). The longest root that holds dest wins.
func CheckDestination(dest string, roots []string) (Target, *Refusal) {
	if len(roots) == 0 {
		return Target{}, refuse(RuleNoRoots, "list the directories products may be promoted below in the operator config: promotion_roots = [\"/srv/promoted\"]",
			"the operator config lists no promotion_roots, so no product may be promoted anywhere")
	}
	if !filepath.IsAbs(dest) || filepath.Clean(dest) != dest {
		return Target{}, refuse(RuleOutsideRoots, "name the destination as an absolute path without '.', '..' or a trailing '/'",
			"--to %q is not an absolute, clean path", dest)
	}
	best := ""
	for _, r := range roots {
		if dest != r && fsafe.Within(dest, r) && len(r) > len(best) {
			best = r
		}
	}
	if best == "" {
		return Target{}, refuse(RuleOutsideRoots, "choose a path below one of "+strings.Join(roots, ", ")+", or have the operator add a root to promotion_roots",
			"%s is not below any promotion root (a root itself is never replaced)", dest)
	}
	return Target{Root: best, Rel: strings.TrimPrefix(strings.TrimPrefix(dest, best), "/")}, nil
}

// CheckReceipt opens the receipt envelope against cat's verifiers and
// checks what the receipt alone decides: a verifier that judges its class,
// not yet expired at now, issued no later than now plus the catalog's
// clock skew, a lifetime within the verifier's max_lifetime, and a pass.
func CheckReceipt(cat *spec.Catalog, envelope []byte, now time.Time) (*spec.OpenedReceipt, *Refusal) {
	o, err := cat.OpenReceipt(envelope)
	switch {
	case errors.Is(err, spec.ErrSignature):
		return nil, refuse(RuleReceiptSignature, "ask a verifier the catalog lists (gensee catalog inspect shows them) for a receipt, signed with its key",
			"the receipt is signed by no verifier of catalog version %d under the verifier it names", cat.Version)
	case err != nil:
		return nil, refuse(RuleReceiptFormat, "pass the receipt envelope a verifier wrote (gensee verify json-schema --out R)",
			"the receipt is not a valid receipt envelope: %v", err)
	}
	r, v := o.Receipt, o.Verifier
	if !v.Judges(r.Class) {
		return nil, refuse(RuleVerifierClass, "ask a verifier whose classes include "+r.Class+", or have the catalog's verifier list it",
			"verifier %s may judge %s, not %s", v.ID, strings.Join(v.Classes, ", "), r.Class)
	}
	if !now.Before(r.ExpiresAt) {
		return nil, refuse(RuleReceiptExpired, "verify the product again for a fresh receipt",
			"the receipt expired at %s (now %s)", r.ExpiresAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if r.IssuedAt.After(now.Add(trust.ClockSkew)) {
		return nil, refuse(RuleReceiptEarly, "check this host's clock (NTP) or the verifier's",
			"the receipt is issued at %s, more than %s after now (%s)", r.IssuedAt.UTC().Format(time.RFC3339), trust.ClockSkew, now.UTC().Format(time.RFC3339))
	}
	if life := r.ExpiresAt.Sub(r.IssuedAt); life > v.Lifetime() {
		return nil, refuse(RuleReceiptLifetime, "have the verifier issue receipts living at most "+v.MaxLifetime,
			"the receipt lives %s, longer than verifier %s's max_lifetime %s", life, v.ID, v.MaxLifetime)
	}
	if r.Verdict != spec.ReceiptPass {
		return nil, refuse(RuleReceiptVerdict, "fix the product and run it again; a failed product is never promoted",
			"verifier %s judged the product %q: %s", v.ID, r.Slot, r.Verdict)
	}
	return o, nil
}

// CheckBinding finds slot in manifest m of operation opID and requires
// the receipt to name exactly that product: the operation, the slot, the
// class and the digest the manifest records. The product must have passed
// the gate and be staged.
func CheckBinding(r *spec.Receipt, opID, slot string, m *spec.Manifest) (*spec.ProductRecord, *Refusal) {
	if m.OperationID != opID {
		return nil, refuse(RuleManifest, "keep the operation directory for investigation; do not promote from it",
			"the manifest of operation %s names operation %q", opID, m.OperationID)
	}
	var pr *spec.ProductRecord
	for i := range m.Products {
		if m.Products[i].Slot == slot {
			pr = &m.Products[i]
			break
		}
	}
	switch {
	case pr == nil:
		return nil, refuse(RuleProduct, "name one of the products gensee manifest show lists",
			"operation %s has no product at slot %q", opID, slot)
	case pr.Verdict != spec.VerdictPass || pr.Staged == "":
		return nil, refuse(RuleProduct, "a product that failed the gate is never staged nor promoted; fix the workload and run it again",
			"product %q of operation %s failed the gate (verdict %s)", slot, opID, pr.Verdict)
	case pr.Digest() == "":
		return nil, refuse(RuleManifest, "keep the operation directory for investigation; do not promote from it",
			"the manifest records no digest for product %q", slot)
	}
	want := []struct{ field, receipt, manifest string }{
		{"operation_id", r.OperationID, opID},
		{"slot", r.Slot, pr.Slot},
		{"class", r.Class, pr.Class},
		{"product_digest", r.ProductDigest, pr.Digest()},
	}
	for _, w := range want {
		if w.receipt != w.manifest {
			return nil, refuse(RuleReceiptBinding, "verify this very product (gensee verify ... --operation "+opID+" --slot "+slot+") and promote with that receipt",
				"the receipt's %s is %q where this product's is %q: the receipt judged another product", w.field, w.receipt, w.manifest)
		}
	}
	return pr, nil
}

// CheckFindings refuses an operation with a finding no person cleared:
// evidence that a boundary failed while it ran, or that its records were
// damaged since.
func CheckFindings(opID string, a spec.Attention) *Refusal {
	open := a.Open()
	if len(open) == 0 {
		return nil
	}
	sigs := make([]string, 0, len(open))
	for _, f := range open {
		sigs = append(sigs, f.Signature)
	}
	return refuse(RuleOpenFinding, "look at it (gensee attention list; gensee boundary audit --operation "+opID+") and, once a person judged it, clear it (gensee attention clear "+opID+")",
		"operation %s has %d open finding(s): %s", opID, len(open), strings.Join(sigs, ", "))
}

// CheckStaged refuses staged products that no longer match the manifest.
func CheckStaged(opID string, res *verify.Result) *Refusal {
	if res.OK() {
		return nil
	}
	first := verify.Line(res.Mismatches[0])
	return refuse(RuleStagedMismatch, "do not use these products; keep the operation directory for investigation (gensee manifest verify "+opID+" lists every problem)",
		"the staged products of operation %s do not match its manifest: %d problem(s), first %s", opID, res.Problems(), verify.SafeText(first))
}

// Executables lists the entries of a product record whose recorded mode
// lets anyone execute them (files only; a directory's search bit is not
// execution). A workspace_patch counts the files it would write.
func Executables(pr *spec.ProductRecord) []string {
	var out []string
	for _, e := range pr.Entries {
		if e.Type != "file" {
			continue
		}
		if m, err := strconv.ParseUint(e.Mode, 8, 32); err == nil && m&0o111 != 0 {
			out = append(out, e.Path)
		} else if err != nil {
			out = append(out, e.Path) // a mode that does not parse is not known to be inert
		}
	}
	return out
}

// CheckExecutables refuses a product with executable files unless the
// receipt names the consumer envelope they must run under, and a receipt
// whose consumer envelope is not a contract the catalog approves (it
// names an envelope nothing could run under).
func CheckExecutables(pr *spec.ProductRecord, r *spec.Receipt, cat *spec.Catalog) *Refusal {
	if r.ConsumerContract != "" {
		if _, ok := cat.Contract(r.ConsumerContract); !ok {
			return refuse(RuleConsumer, "name a contract of the catalog (gensee catalog inspect lists them)",
				"the receipt's consumer_contract %q is not a contract of catalog version %d", r.ConsumerContract, cat.Version)
		}
	}
	exe := Executables(pr)
	if len(exe) > 0 && r.ConsumerContract == "" {
		return refuse(RuleExecutable, "have the verifier name the contract they must run under (its receipt's consumer_contract), or produce them without execute bits",
			"product %q has %d executable file(s) (%s) and the receipt names no consumer contract", pr.Slot, len(exe), verify.SafeText(firstN(exe, 3)))
	}
	return nil
}

func firstN(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(", and %d more", len(s)-n)
}
