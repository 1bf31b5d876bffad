package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/spec"
)

func inferenceCommand() *Command {
	return &Command{
		Name:    "inference",
		Summary: "a reference analyzer's signer: keys, signing and making inferences",
		Subs:    []*Command{keygenCommand("inference", "analyzer"), inferenceSignCommand(), inferenceMakeCommand()},
	}
}

func inferenceSignCommand() *Command {
	return &Command{
		Name:    "sign",
		Summary: "validate an inference payload strictly and sign it as a DSSE envelope",
		Args:    "--key K --in F --out F",
		Long: `The payload is parsed with the runtime's strict decoder; an invalid one is
refused (exit 1) with one "<json path>: <message>" line per problem on
stderr. The exact bytes of F are signed, with payloadType
` + spec.PayloadTypeInference + `. The envelope's JSON text is the value of
the io.gensee.boundary.inference annotation.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o signOptions
			o.flags(fs, "inference")
			return o.runInference
		},
	}
}

func (o *signOptions) runInference(_ context.Context, env *Env) error {
	if err := o.check(); err != nil {
		return err
	}
	key, err := env.readPrivateKey(o.key)
	if err != nil {
		return err
	}
	payload, err := env.readInput(o.in, spec.MaxInferenceBytes)
	if err != nil {
		return readErr("inference payload", o.in, err)
	}
	in, err := spec.ParseInference(payload)
	if err != nil {
		return invalid(env.Stderr, "inference payload "+o.in, err, "fix each listed field and sign again")
	}
	if !env.Now().Before(in.ExpiresAt) {
		env.warnf("inference expired at %s; admission will refuse it", in.ExpiresAt.UTC().Format(time.RFC3339))
	}
	pub, err := signTo(env, spec.PayloadTypeInference, payload, key, o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.infoFor(o.out), "signed inference by %s/%s for %s (top %s) with keyid %s -> %s\n",
		in.Analyzer, in.Model, in.ObservationDigest, candidateText(in.Candidates[0]), spec.KeyID(pub), o.out)
	return nil
}

func candidateText(c spec.Candidate) string {
	return fmt.Sprintf("%s %d bp", c.Class, c.ConfidenceBP)
}

// listFlag collects a repeatable flag's values in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type makeOptions struct {
	observation, key, out string
	analyzer, model       string
	classes, confidences  listFlag
	ttl                   time.Duration
}

func inferenceMakeCommand() *Command {
	return &Command{
		Name:    "make",
		Summary: "build and sign an inference for an observation file (demos and tests)",
		Args:    "--observation F --class C --confidence BP [--class C --confidence BP ...] --key K --out F [--analyzer ID] [--model ID] [--ttl D]",
		Long: `Reads an observation (as gensee observe prints it), and signs an inference
for its digest: candidates in the order given (pair the n-th --class with
the n-th --confidence, in basis points 0-10000, highest first), issued now,
expiring after --ttl. Admission still checks the analyzer, model, classes,
thresholds and margin against the catalog.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o makeOptions
			fs.StringVar(&o.observation, "observation", "", "observation JSON file `F` (- for stdin)")
			fs.Var(&o.classes, "class", "candidate class `C` (repeatable)")
			fs.Var(&o.confidences, "confidence", "candidate confidence `BP` in basis points (repeatable, one per --class)")
			fs.StringVar(&o.analyzer, "analyzer", "ref-analyzer", "analyzer `ID` as in the catalog")
			fs.StringVar(&o.model, "model", "ref-model-1", "model `ID` as in the catalog's analyzer")
			fs.DurationVar(&o.ttl, "ttl", 30*time.Minute, "lifetime `D` of the inference (at most the analyzer's max_lifetime)")
			fs.StringVar(&o.key, "key", "", "analyzer private key file `K`")
			fs.StringVar(&o.out, "out", "", "signed envelope file `F` to write (- for stdout)")
			return o.run
		},
	}
}

func (o *makeOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"observation": o.observation, "key": o.key, "out": o.out}); err != nil {
		return err
	}
	cands, err := o.candidates()
	if err != nil {
		return err
	}
	if o.ttl <= 0 {
		return errUsage("--ttl %s must be positive", o.ttl)
	}
	key, err := env.readPrivateKey(o.key)
	if err != nil {
		return err
	}
	data, err := env.readInput(o.observation, spec.MaxObservationBytes)
	if err != nil {
		return readErr("observation", o.observation, err)
	}
	obs, err := spec.ParseObservation(data)
	if err != nil {
		return invalid(env.Stderr, "observation "+o.observation, err, "pass the JSON that gensee observe prints")
	}
	digest, err := obs.Digest()
	if err != nil {
		return fail(ExitRefused, "digest observation "+o.observation, err, "")
	}
	now := env.Now().UTC().Truncate(time.Second)
	in := spec.Inference{
		Schema: spec.SchemaInference, Analyzer: o.analyzer, Model: o.model, ObservationDigest: digest,
		Candidates: cands, IssuedAt: now, ExpiresAt: now.Add(o.ttl),
	}
	if err := in.Validate(); err != nil {
		return invalid(env.Stderr, "inference", err, "fix the flags named by the listed fields")
	}
	payload, err := spec.InferencePayload(in) // what the reference analyzer signs too
	if err != nil {
		return fail(ExitRefused, "encode inference", err, "")
	}
	pub, err := signTo(env, spec.PayloadTypeInference, payload, key, o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.infoFor(o.out), "signed inference by %s/%s for %s (top %s, expires %s) with keyid %s -> %s\n",
		in.Analyzer, in.Model, digest, candidateText(cands[0]), in.ExpiresAt.Format(time.RFC3339), spec.KeyID(pub), o.out)
	return nil
}

// candidates pairs --class and --confidence values in order.
func (o *makeOptions) candidates() ([]spec.Candidate, error) {
	if len(o.classes) == 0 {
		return nil, errUsage("--class is required")
	}
	if len(o.classes) != len(o.confidences) {
		return nil, errUsage("%d --class but %d --confidence: give one --confidence per --class", len(o.classes), len(o.confidences))
	}
	out := make([]spec.Candidate, len(o.classes))
	for i, c := range o.classes {
		bp, err := strconv.Atoi(o.confidences[i])
		if err != nil || bp < 0 || bp > 10000 {
			return nil, errUsage("--confidence %q: want an integer 0-10000 (basis points)", o.confidences[i])
		}
		out[i] = spec.Candidate{Class: c, ConfidenceBP: bp}
	}
	return out, nil
}
