package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/shim/promote"
	"github.com/gensee/gensee/spec"
)

// inTotoPromotionType is the predicate type of a promotion's statement:
// its predicate is the promotion record (spec.Promotion), receipt
// envelope included.
const inTotoPromotionType = "https://gensee.dev/promotion/v1"

// promotionsOf reads op's promotion records (gensee promote); what cannot
// be read is a warning, and the records before it are kept.
func promotionsOf(env *Env, op *operation) []spec.Promotion {
	ps, err := promote.Records(op.store(), op.id)
	if err != nil {
		env.warnf("promotion records of operation %s: %v", op.id, err)
	}
	return ps
}

// renderPromotions lists the promotions after the manifest's summary.
func renderPromotions(w io.Writer, ps []spec.Promotion) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "\npromotions (%s; the manifest describes the run and is never changed by one):\n", promote.RecordFile)
	tw := table(w)
	row(tw, "  AT", "SLOT", "TO", "DIGEST", "RECEIPT", "BY")
	for _, p := range ps {
		by := fmt.Sprintf("uid %d", p.By.UID)
		if p.By.InvokingUID != p.By.UID || p.By.InvokingUser != "" {
			by += fmt.Sprintf(", invoking uid %d", p.By.InvokingUID)
			if p.By.InvokingUser != "" {
				by += " (" + safeText(p.By.InvokingUser) + ")"
			}
		}
		if p.By.SudoUser != "" {
			by += ", SUDO_USER=" + safeText(p.By.SudoUser)
		}
		receipt := p.ReceiptDigest + " by " + safeText(p.Verifier) + " " + safeText(p.VerifierVersion)
		if p.ConsumerContract != "" {
			receipt += ", runs under " + safeText(p.ConsumerContract)
		}
		row(tw, "  "+p.At.UTC().Format(time.RFC3339), safeText(p.Slot), safeText(p.Destination), p.ProductDigest, receipt, by)
	}
	tw.Flush()
}

// promotionStatement is the in-toto Statement of one promotion: its
// subjects are the promoted files at the destination with their sha256 (a
// directory product contributes one per file, named <destination>/<path>),
// its predicate the promotion record. m is the operation's manifest, whose
// record of the product lists a directory product's files.
func promotionStatement(p spec.Promotion, m *spec.Manifest) (*inTotoStmt, error) {
	pred, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	st := &inTotoStmt{Type: inTotoStatementType, PredicateType: inTotoPromotionType, Predicate: pred}
	if !gate.TreeClass(p.Class) {
		st.Subject = []inTotoSubject{subject(p.Destination, strings.TrimPrefix(p.ProductDigest, "sha256:"))}
		return st, nil
	}
	for _, pr := range m.Products {
		if pr.Slot != p.Slot || pr.Digest() != p.ProductDigest {
			continue
		}
		for _, e := range pr.Entries {
			if e.Type == "file" && e.SHA256 != "" {
				st.Subject = append(st.Subject, subject(path.Join(p.Destination, gate.EntryRel(pr.Slot, e.Path)), e.SHA256))
			}
		}
	}
	if len(st.Subject) == 0 {
		// A tree without a file: its digest is all there is to attest.
		st.Subject = []inTotoSubject{{Name: p.Destination, Digest: map[string]string{"gensee-tree-sha256": strings.TrimPrefix(p.ProductDigest, "sha256:")}}}
	}
	return st, nil
}
