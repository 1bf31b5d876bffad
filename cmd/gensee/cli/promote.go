package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
	"github.com/gensee/gensee/shim/hostrun"
	"github.com/gensee/gensee/shim/promote"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

type promoteOptions struct {
	operation, slot, receipt, to, config string
	json                                 bool
}

func promoteCommand() *Command {
	return &Command{
		Name:       "promote",
		Summary:    "copy a verified staged product out of an operation, atomically and on the record",
		Args:       "OPID --slot SLOT --receipt R --to DEST [--config F] [--json]",
		Positional: "operation",
		Long: `Promotes one staged product of operation OPID (as gensee ls prints it) to
DEST, as root, once a semantic verifier the catalog lists has judged that
exact product (a receipt: gensee verify json-schema writes one). The
receipt is guidance from a verifier the operator trusts; every check below
and the write are the host's. Each check that fails refuses with its rule
and the fix (exit 1), and nothing is written:

  not_root                   gensee promote runs as root
  no_promotion_roots         the operator config lists promotion_roots
  destination_outside_roots  DEST lies strictly below one of them
  trust                      the trust anchor and the catalog load as the
                             runtime loads them (signature, expiry,
                             rollback)
  receipt_format             R is a receipt envelope
  receipt_signature          signed by the catalog verifier it names
  verifier_class             that verifier judges the product's class
  receipt_expired            not expired
  receipt_not_yet_valid      not issued in the future (beyond 2m skew)
  receipt_lifetime           within the verifier's max_lifetime
  receipt_verdict            the verdict is pass
  manifest                   the manifest exists and is valid
  product_not_staged         SLOT passed the gate and is staged
  receipt_binding            the receipt names this operation, SLOT, the
                             product's class and its digest as the
                             manifest records them
  open_finding               the operation has no finding no person
                             cleared
  staged_mismatch            the staged products re-hash to the manifest
                             (raised as a product_mismatch finding, as
                             gensee manifest verify raises it)
  consumer_unknown           a consumer contract the receipt names is a
                             contract of the catalog
  executable_without_consumer  a product with executable files names one
  destination_parent         DEST's directory exists, reached from the
                             root without a symlink
  destination_exists         nothing else is at DEST
  copy_mismatch              what was copied hashes to the record

Then the product is copied, while hashed, into a temporary beside DEST
(in its file system), fsynced and renamed into place without replacing
anything: a directory product as one unit, a workspace_patch as its patch
file (never applied), modes as staged (no setuid, setgid, sticky or
group/other write). A promotion record is appended to the operation's
promotions.jsonl: the product, DEST, when, who (the kernel's uid and
invoking uid; SUDO_USER only as claimed), the receipt's digest and the
receipt itself. The manifest is never changed: promoted: false describes
the run. gensee manifest show lists the promotions, --in-toto adds a
statement for each.

A re-run with the same receipt and DEST, where DEST already holds exactly
the product, succeeds and changes nothing. --json prints {changed,
recorded, promotion}.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o promoteOptions
			fs.StringVar(&o.operation, "operation", "", "operation `ID` (32 hex characters; or OPID as the argument)")
			fs.StringVar(&o.slot, "slot", "", "the product's `SLOT`, as the manifest names it")
			fs.StringVar(&o.receipt, "receipt", "", "receipt envelope file `R` (- for stdin)")
			fs.StringVar(&o.to, "to", "", "destination `DEST`: a path below a promotion root that does not exist yet")
			addConfigFlag(fs, &o.config)
			fs.BoolVar(&o.json, "json", false, "print the result as JSON")
			return o.run
		},
	}
}

// PromoteView is gensee promote --json.
type PromoteView struct {
	Changed   bool           `json:"changed"`
	Recorded  bool           `json:"recorded"`
	Promotion spec.Promotion `json:"promotion"`
}

func (o *promoteOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"operation": o.operation, "slot": o.slot, "receipt": o.receipt, "to": o.to}); err != nil {
		return err
	}
	dest, err := filepath.Abs(o.to)
	if err != nil {
		return errUsage("--to %s: %v", o.to, err)
	}
	cfg, err := env.enforcingConfig(o.config)
	if err != nil {
		return err
	}
	receipt, err := env.readInput(o.receipt, spec.MaxEnvelopeBytes)
	if err != nil {
		return readErr("receipt", o.receipt, err)
	}
	req := promote.Request{
		Store: record.Store{Dir: cfg.StateDir}, OperationID: o.operation, Slot: o.slot, Receipt: receipt,
		Dest: dest, Roots: cfg.PromotionRoots, Trust: trustOf(cfg), EUID: os.Geteuid(), By: promoter(env), Now: env.Now(),
	}
	res, err := promote.Promote(req)
	if res != nil {
		who := ""
		if dir, derr := req.Store.OperationDir(o.operation); derr == nil {
			who = admittedContainer(dir)
		}
		reportRaised(env, o.operation, who, cfg.NotifyCommand, res.Raised, "gensee promote")
	}
	var rf *promote.Refusal
	switch {
	case errors.As(err, &rf):
		return fail(ExitRefused, "", rf, "")
	case err != nil:
		return fail(ExitUsage, "promote "+o.slot+" of operation "+o.operation, err, "")
	}
	p := res.Promotion
	if o.json {
		if err := writeJSON(env.Stdout, PromoteView{Changed: res.Changed, Recorded: res.Recorded, Promotion: p}); err != nil {
			return fail(ExitUsage, "write output", err, "")
		}
		return nil
	}
	if res.Changed {
		fmt.Fprintf(env.Stdout, "promoted %s of operation %s to %s (%s; receipt %s by %s)\n",
			safeText(p.Slot), p.OperationID, safeText(p.Destination), p.ProductDigest, p.ReceiptDigest, p.Verifier)
	} else {
		fmt.Fprintf(env.Stdout, "%s already holds %s of operation %s (%s): nothing changed\n",
			safeText(p.Destination), safeText(p.Slot), p.OperationID, p.ProductDigest)
	}
	if res.Recorded {
		fmt.Fprintf(env.Stdout, "recorded in %s\n", filepath.Join(record.Store{Dir: cfg.StateDir}.OperationsDir(), p.OperationID, promote.RecordFile))
	}
	return nil
}

// trustOf loads the catalog as every front door does.
func trustOf(cfg config.Config) func(time.Time) (*spec.Catalog, error) {
	return func(now time.Time) (*spec.Catalog, error) {
		l, rf := engine.LoadTrust(cfg, cfg.Catalog, "catalog", now)
		if rf != nil {
			return nil, errors.New(rf.Text())
		}
		return l.Catalog, nil
	}
}

// promoter is who runs gensee promote, as the kernel says (the real uid,
// and the invoking user: the nearest ancestor whose real uid is not 0),
// and SUDO_USER as the environment claims it.
func promoter(env *Env) spec.Promoter {
	uid := os.Getuid()
	p := spec.Promoter{UID: uint32(uid), InvokingUID: uint32(uid), SudoUser: env.Getenv("SUDO_USER")}
	if id, err := hostrun.InvokingUser(user.LookupId); err == nil {
		p.InvokingUID, p.InvokingUser = id.UID, id.Name
	} else if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		p.InvokingUser = u.Username
	}
	return p
}
