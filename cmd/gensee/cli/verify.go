package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/gensee/gensee/internal/version"
	"github.com/gensee/gensee/shim/verifier"
	"github.com/gensee/gensee/spec"
)

func verifyCommand() *Command {
	return &Command{
		Name:    "verify",
		Summary: "a reference semantic verifier: its key, and signed receipts for staged products",
		Subs:    []*Command{keygenCommand("verify", "verifier"), verifyJSONSchemaCommand()},
	}
}

// maxSchemaBytes bounds a JSON Schema file: the judge reads no larger.
const maxSchemaBytes = verifier.MaxJudgeSchemaBytes

type verifyJSONSchemaOptions struct {
	ref                                   opRef
	schema, key, slot, out                string
	verifierID, verifierVersion, consumer string
	ttl                                   time.Duration
}

func verifyJSONSchemaCommand() *Command {
	return &Command{
		Name:       "json-schema",
		Summary:    "judge a staged structured_result against a JSON Schema and sign a receipt",
		Args:       "--schema S --key K --slot SLOT " + opRefArgs + " [--verifier-id ID] [--consumer-contract ID] [--ttl D] [--out R]",
		Positional: opRefPositional,
		Long: `The reference verifier for structured_result products. It reads the
operation's manifest (as manifest show does), finds the passing
structured_result at --slot, and reads its staged copy under
<state_dir>/operations/<opid>/staged through file descriptors that never
follow a symlink: at most the bytes the manifest records, and only when
they hash to its sha256 (else exit 1: run gensee manifest verify).

The document must be strict JSON (one value, valid UTF-8, no repeated
key) and valid against the JSON Schema S (draft 2020-12 unless it names
another with $schema; formats asserted). S may refer to nothing outside
itself: no file and no URL is ever loaded.

Either way it signs a receipt (payloadType
` + spec.PayloadTypeReceipt + `) with the verifier key K (as
gensee verify keygen writes it) over the operation id, slot, class, the
product's digest as the manifest records it, the verdict (pass or fail),
the verifier id and version, criteria_digest (the schema file's sha256),
issued_at and expires_at (--ttl later; the catalog's verifier bounds it
with max_lifetime), and --consumer-contract when given: the catalog
contract an executable product must run under. The receipt goes to --out
(default stdout); gensee promote takes it.

The judge is gensee-verifier, a small static binary beside gensee and as
trusted as it (make build puts both in bin/; without it nothing is
judged). It runs with no environment, only pipes to gensee, 60 s and
4 GiB of memory, not dumpable, and when gensee runs as root as a uid
and gid of its own (drawn at random above 0x60000000, outside
/etc/subuid's and /etc/subgid's ranges: no other process can trace it or
forge its answer); it reads S
(at most 4 MiB) and the document (at most 64 MiB, the gate's default
max_bytes). S is compiled there: one that is not a JSON Schema is
refused only once the product is read.

Exit 0: pass. Exit 1: fail (the receipt, with verdict fail, is still
written; each problem is a line on stderr), or the staged copy does not
match the manifest, or S is not a JSON Schema, or the product is over
64 MiB. Exit 2: usage or I/O, or gensee-verifier is missing, untrusted
or gave no answer.

A receipt is guidance: the verifier's word on what the product means.
It promotes nothing; gensee promote checks it and everything else.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o verifyJSONSchemaOptions
			o.ref.flags(fs)
			fs.StringVar(&o.schema, "schema", "", "JSON Schema file `S` the product must satisfy")
			fs.StringVar(&o.key, "key", "", "verifier private key file `K` (hex seed, as gensee verify keygen writes it)")
			fs.StringVar(&o.slot, "slot", "", "the product's `SLOT`, as the manifest names it")
			fs.StringVar(&o.verifierID, "verifier-id", "json-schema", "verifier `ID` as in the catalog's verifiers")
			fs.StringVar(&o.verifierVersion, "verifier-version", "gensee/"+version.Version, "the verifier's `VERSION`, recorded in the receipt")
			fs.StringVar(&o.consumer, "consumer-contract", "", "catalog contract `ID` an executable product must run under")
			fs.DurationVar(&o.ttl, "ttl", time.Hour, "lifetime `D` of the receipt (at most the verifier's max_lifetime)")
			fs.StringVar(&o.out, "out", stdio, "receipt envelope file `R` to write (- for stdout); replaced atomically")
			return o.run
		},
	}
}

func (o *verifyJSONSchemaOptions) run(ctx context.Context, env *Env) error {
	if err := required(map[string]string{"schema": o.schema, "key": o.key, "slot": o.slot}); err != nil {
		return err
	}
	if o.ttl <= 0 {
		return errUsage("--ttl %s must be positive", o.ttl)
	}
	key, err := env.readPrivateKey(o.key)
	if err != nil {
		return err
	}
	schema, err := env.readInput(o.schema, maxSchemaBytes)
	if err != nil {
		return readErr("JSON Schema", o.schema, err)
	}
	sum := sha256.Sum256(schema)
	criteria := "sha256:" + hex.EncodeToString(sum[:])
	op, err := o.ref.load(env, env.Stderr)
	if err != nil {
		return err
	}
	pr, err := verifier.Find(op.m, o.slot, spec.ClassStructuredResult)
	if err != nil {
		return fail(ExitRefused, "find product", err, "name a passing structured_result of the operation (gensee manifest show "+op.id+")")
	}
	if err := verifier.JudgeSizes(int64(len(schema)), pr.Bytes); err != nil {
		return fail(ExitRefused, "judge product "+o.slot+" of operation "+op.id, err, "")
	}
	body, err := verifier.Read(op.dir, pr)
	switch {
	case errors.Is(err, verifier.ErrStagedMismatch):
		return fail(ExitRefused, "read product "+o.slot+" of operation "+op.id, err, "do not use it; gensee manifest verify "+op.id+" lists and flags every problem")
	case err != nil:
		return fail(ExitUsage, "read product "+o.slot+" of operation "+op.id, err, "run as root: the state dir is root's")
	}
	// The judge (gensee-verifier) compiles the schema too: a schema
	// that does not compile is refused only now, after the product.
	problems, err := judgeJSONSchema(ctx, schema, body)
	var se *verifier.SchemaError
	switch {
	case errors.As(err, &se):
		return fail(ExitRefused, "read JSON Schema "+o.schema, err, "pass a JSON Schema document that refers to nothing outside itself")
	case err != nil:
		return fail(ExitUsage, "judge product "+o.slot+" of operation "+op.id, err, "")
	}
	j := verifier.Judgement{OperationID: op.id, Product: pr, Problems: problems, Verifier: o.verifierID,
		Version: o.verifierVersion, Criteria: criteria, Consumer: o.consumer}
	r, err := j.Receipt(env.Now(), o.ttl)
	if err != nil {
		return invalid(env.Stderr, "receipt", err, "fix the flags named by the listed fields")
	}
	signed, err := verifier.Sign(r, key)
	if err != nil {
		return fail(ExitUsage, "sign receipt", err, "")
	}
	if err := env.writeOutput(o.out, signed, 0o644); err != nil {
		return writeErr("receipt", o.out, err)
	}
	info := env.infoFor(o.out)
	fmt.Fprintf(info, "%s: %s of operation %s (%s) against %s; receipt by %s expires %s -> %s\n",
		r.Verdict, o.slot, op.id, r.ProductDigest, criteria, o.verifierID, r.ExpiresAt.Format(time.RFC3339), o.out)
	if r.Verdict == spec.ReceiptPass {
		return nil
	}
	for _, p := range j.Problems {
		fmt.Fprintf(env.Stderr, "%s\n", safeText(p))
	}
	return fail(ExitRefused, "product "+o.slot+" of operation "+op.id,
		fmt.Errorf("%d problem(s) against the JSON Schema, listed above; the receipt says fail", len(j.Problems)),
		"fix the workload's result; gensee promote refuses a failing receipt")
}
