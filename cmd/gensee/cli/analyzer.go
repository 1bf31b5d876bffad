package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/analyzer/reference"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// DefaultAnalyzerSocket is where gensee analyzer serve listens unless
// --listen names another socket; a selector's analyzer endpoint names it.
const DefaultAnalyzerSocket = "/run/gensee/analyzer.sock"

func analyzerCommand() *Command {
	return &Command{
		Name:    "analyzer",
		Summary: "the reference node analyzer: its keys, its signed rules, serving inferences",
		Subs: []*Command{keygenCommand("inference", "analyzer"), analyzerServeCommand(), {
			Name:    "rules",
			Summary: "the operator key that signs analyzer rules, and signing them",
			Subs:    []*Command{rulesKeygenCommand(), rulesSignCommand()},
		}},
	}
}

type serveOptions struct {
	config, id, rules, key, model, listen string
	lifetime                              time.Duration
}

func analyzerServeCommand() *Command {
	return &Command{
		Name:    "serve",
		Summary: "answer the runtime's requests for inferences on a unix socket",
		Args:    "--id ID --rules F --key K [--model M] [--listen SOCK] [--lifetime D] [--config F]",
		Long: `Runs as the catalog analyzer --id until SIGINT or SIGTERM. The trust anchor,
the catalog and the state dir come from the operator config, as for the
runtime (the catalog's high-water mark is kept in memory, never written).
It refuses to start (exit 1) unless the catalog lists the analyzer with a
rules_key, the --rules envelope verifies with that key, is for this
analyzer and is valid now, every rule's class is in the analyzer's scope,
--key is the private half of the analyzer's public_key, and --model is one
of its models. Inferences live --lifetime, at most the analyzer's
max_lifetime. History is read from <state_dir>/operations, read only.
The socket is created 0600 (its directory 0700 if missing); a selector
names it as analyzer.endpoint. One log line per request on stderr.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o serveOptions
			addConfigFlag(fs, &o.config)
			fs.StringVar(&o.id, "id", "", "catalog analyzer `ID` to run as")
			fs.StringVar(&o.rules, "rules", "", "signed rules envelope `F` (gensee analyzer rules sign)")
			fs.StringVar(&o.key, "key", "", "analyzer private key file `K` (gensee analyzer keygen)")
			fs.StringVar(&o.model, "model", reference.DefaultModel, "model `M` the inferences name (one of the analyzer's models)")
			fs.StringVar(&o.listen, "listen", DefaultAnalyzerSocket, "unix socket `SOCK` to serve on")
			fs.DurationVar(&o.lifetime, "lifetime", reference.DefaultLifetime, "lifetime `D` of an inference (at most the analyzer's max_lifetime)")
			return o.run
		},
	}
}

func (o *serveOptions) run(ctx context.Context, env *Env) error {
	if err := required(map[string]string{"id": o.id, "rules": o.rules, "key": o.key}); err != nil {
		return err
	}
	if o.lifetime <= 0 {
		return errUsage("--lifetime %s must be positive", o.lifetime)
	}
	cfg, err := env.operatorConfig(o.config)
	if err != nil {
		return err
	}
	loaded, err := reference.LoadCatalog(cfg.TrustAnchor, cfg.Catalog, env.Now())
	if err != nil {
		return fail(ExitRefused, "load catalog", err, "")
	}
	log.L.Logger.SetOutput(env.Stderr)
	a, err := reference.Load(ctx, reference.Config{Catalog: loaded.Catalog, ID: o.id, RulesFile: o.rules, KeyFile: o.key,
		Model: o.model, Records: record.Store{Dir: cfg.StateDir}.OperationsDir(), Lifetime: o.lifetime, Now: env.Now})
	if err != nil {
		code := ExitRefused
		var se *reference.StartError
		if errors.As(err, &se) && (se.Rule == reference.RuleRulesFile || se.Rule == reference.RuleKeyFile) {
			code = ExitUsage
		}
		return fail(code, "", err, "")
	}
	if err := a.Serve(ctx, o.listen); err != nil {
		return fail(ExitUsage, "", err, "")
	}
	return nil
}

type rulesKeygenOptions struct{ out string }

func rulesKeygenCommand() *Command {
	return &Command{
		Name:    "keygen",
		Summary: "write a new ed25519 key pair that signs analyzer rules",
		Args:    "--out DIR",
		Long: `Writes DIR/analyzer-rules-private-key.hex (mode 0600: an operator key; keep it
offline, it signs the rules the reference analyzer follows) and
DIR/analyzer-rules-public-key.hex (mode 0644). Refuses to overwrite either
file. Put the public key's 64 hex characters in the catalog's
analyzers[].rules_key.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o rulesKeygenOptions
			fs.StringVar(&o.out, "out", "", "directory `DIR` for the key files (created 0700 if missing)")
			return o.run
		},
	}
}

func (o *rulesKeygenOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"out": o.out}); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o700); err != nil {
		return fail(ExitUsage, "create directory "+o.out, unwrapPath(err), "pass an --out directory you can write")
	}
	kp := pairIn(o.out, "analyzer-rules")
	pub, err := writeKeyPair(kp)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s (0600): keep it secret and offline\n", kp.private)
	fmt.Fprintf(env.Stdout, "wrote %s: keyid %s\n", kp.public, spec.KeyID(pub))
	fmt.Fprintf(env.Stdout, "put this in the catalog's analyzers[].rules_key: %x\n", []byte(pub))
	return nil
}

func rulesSignCommand() *Command {
	return &Command{
		Name:    "sign",
		Summary: "validate an analyzer rule set strictly and sign it as a DSSE envelope",
		Args:    "--key K --in F --out F",
		Long: `The rule set (schema ` + spec.SchemaAnalyzerRules + `) is parsed with the
runtime's strict decoder; an invalid one is refused (exit 1) with one
"<json path>: <message>" line per problem on stderr. The exact bytes of F
are signed, with payloadType ` + spec.PayloadTypeAnalyzerRules + `, by the
operator key whose public half is the analyzer's rules_key.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o signOptions
			o.flags(fs, "analyzer rules")
			return o.runRules
		},
	}
}

func (o *signOptions) runRules(_ context.Context, env *Env) error {
	if err := o.check(); err != nil {
		return err
	}
	key, err := env.readPrivateKey(o.key)
	if err != nil {
		return err
	}
	payload, err := env.readInput(o.in, spec.MaxAnalyzerRulesBytes)
	if err != nil {
		return readErr("analyzer rules", o.in, err)
	}
	r, err := spec.ParseAnalyzerRules(payload)
	if err != nil {
		return invalid(env.Stderr, "analyzer rules "+o.in, err, "fix each listed field and sign again")
	}
	if !env.Now().Before(r.ExpiresAt) {
		env.warnf("analyzer rules expired at %s; the analyzer will refuse to start with them", r.ExpiresAt.UTC().Format(time.RFC3339))
	}
	pub, err := signTo(env, spec.PayloadTypeAnalyzerRules, payload, key, o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.infoFor(o.out), "signed analyzer rules version %d for %s (%d rules, expires %s) with keyid %s -> %s\n",
		r.Version, r.Analyzer, len(r.Rules), r.ExpiresAt.UTC().Format(time.RFC3339), spec.KeyID(pub), o.out)
	return nil
}
