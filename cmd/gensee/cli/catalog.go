package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/spec"
)

func catalogCommand() *Command {
	return &Command{
		Name:    "catalog",
		Summary: "make the catalog root key, sign catalogs, inspect signed ones",
		Subs:    []*Command{keygenCommand("catalog", "catalog-root"), catalogSignCommand(), catalogInspectCommand()},
	}
}

type keygenOptions struct {
	out    string
	group  string // "catalog", "inference" or "verify", for messages
	prefix string // file name prefix
}

func keygenCommand(group, prefix string) *Command {
	summary := "write a new catalog root ed25519 key pair into a directory"
	long := `Writes DIR/catalog-root-private-key.hex (mode 0600: the 32-byte seed in hex;
keep it offline, it signs catalogs) and DIR/catalog-root-public-key.hex (mode
0644 in DIR). Refuses to overwrite either file. The runtime only trusts the
public key once installed as the trust anchor, owned by root:root with mode
0400, in a directory only root can write:
  install -o root -g root -m 0400 DIR/catalog-root-public-key.hex ` + config.DefaultTrustAnchor
	switch group {
	case "verify":
		summary = "write a new verifier ed25519 key pair into a directory"
		long = `Writes DIR/verifier-private-key.hex (mode 0600; the verifier signs
receipts with it) and DIR/verifier-public-key.hex (mode 0644). Refuses to
overwrite either file. Put the public key's 64 hex characters in the
catalog's verifiers[].public_key.`
	case "inference":
		summary = "write a new analyzer ed25519 key pair into a directory"
		long = `Writes DIR/analyzer-private-key.hex (mode 0600; the reference analyzer signs
inferences with it) and DIR/analyzer-public-key.hex (mode 0644). Refuses to
overwrite either file. Put the public key's 64 hex characters in the
catalog's analyzers[].public_key.`
	}
	return &Command{
		Name:    "keygen",
		Summary: summary,
		Args:    "--out DIR",
		Long:    long,
		Setup: func(fs *flag.FlagSet) Runner {
			o := keygenOptions{group: group, prefix: prefix}
			fs.StringVar(&o.out, "out", "", "directory `DIR` for the key files (created 0700 if missing)")
			return o.run
		},
	}
}

func (o *keygenOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"out": o.out}); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o700); err != nil {
		return fail(ExitUsage, "create directory "+o.out, unwrapPath(err), "pass an --out directory you can write")
	}
	kp := pairIn(o.out, o.prefix)
	pub, err := writeKeyPair(kp)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s (0600): keep it secret and offline\n", kp.private)
	fmt.Fprintf(env.Stdout, "wrote %s: keyid %s\n", kp.public, spec.KeyID(pub))
	switch o.group {
	case "inference":
		fmt.Fprintf(env.Stdout, "put this in the catalog's analyzers[].public_key: %x\n", []byte(pub))
		return nil
	case "verify":
		fmt.Fprintf(env.Stdout, "put this in the catalog's verifiers[].public_key: %x\n", []byte(pub))
		return nil
	}
	fmt.Fprintf(env.Stdout, "the runtime trusts it only as a root-owned 0400 trust anchor (needs root):\n  install -o root -g root -m 0400 %s %s\n", kp.public, config.DefaultTrustAnchor)
	return nil
}

// signOptions is shared by catalog sign and inference sign.
type signOptions struct {
	key, in, out string
}

func (o *signOptions) flags(fs *flag.FlagSet, doc string) {
	fs.StringVar(&o.key, "key", "", "private key file `K` (hex seed, as keygen writes it)")
	fs.StringVar(&o.in, "in", "", "unsigned "+doc+" payload JSON file `F` (- for stdin)")
	fs.StringVar(&o.out, "out", "", "signed envelope file `F` to write (- for stdout); replaced atomically")
}

func (o *signOptions) check() error {
	if err := required(map[string]string{"key": o.key, "in": o.in, "out": o.out}); err != nil {
		return err
	}
	if sameFile(o.in, o.out) || (o.in == o.out && o.in != stdio) {
		return errUsage("--out %s is the --in file; write the envelope elsewhere", o.out)
	}
	return nil
}

func catalogSignCommand() *Command {
	return &Command{
		Name:    "sign",
		Summary: "validate a catalog payload strictly and sign it as a DSSE envelope",
		Args:    "--key K --in F --out F",
		Long: `The payload is parsed with the runtime's strict decoder and every catalog
rule; an invalid one is refused (exit 1) with one "<json path>: <message>"
line per problem on stderr. The exact bytes of F are signed, with
payloadType ` + spec.PayloadTypeCatalog + `.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o signOptions
			o.flags(fs, "catalog")
			return o.runCatalog
		},
	}
}

func (o *signOptions) runCatalog(_ context.Context, env *Env) error {
	if err := o.check(); err != nil {
		return err
	}
	key, err := env.readPrivateKey(o.key)
	if err != nil {
		return err
	}
	payload, err := env.readInput(o.in, spec.MaxCatalogBytes)
	if err != nil {
		return readErr("catalog payload", o.in, err)
	}
	cat, err := spec.ParseCatalog(payload)
	if err != nil {
		return invalid(env.Stderr, "catalog payload "+o.in, err, "fix each listed field and sign again")
	}
	now := env.Now()
	if !now.Before(cat.ExpiresAt) {
		env.warnf("catalog version %d expired at %s; the runtime will refuse it", cat.Version, cat.ExpiresAt.UTC().Format(time.RFC3339))
	}
	pub, err := signTo(env, spec.PayloadTypeCatalog, payload, key, o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.infoFor(o.out), "signed catalog version %d (%d contracts, expires %s) with keyid %s -> %s\n",
		cat.Version, len(cat.Contracts), cat.ExpiresAt.UTC().Format(time.RFC3339), spec.KeyID(pub), o.out)
	return nil
}

// signTo signs payload, checks the envelope verifies and fits the
// runtime's envelope cap, and writes it to out (0644).
func signTo(env *Env, payloadType string, payload []byte, key ed25519.PrivateKey, out string) (ed25519.PublicKey, error) {
	e, err := spec.SignEnvelope(payloadType, payload, key)
	if err != nil {
		return nil, fail(ExitUsage, "sign", err, "")
	}
	pub, _ := key.Public().(ed25519.PublicKey)
	if _, err := e.Verify(payloadType, []ed25519.PublicKey{pub}, 1); err != nil {
		return nil, fail(ExitUsage, "verify the new signature", err, "")
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, fail(ExitUsage, "encode envelope", err, "")
	}
	data = append(data, '\n')
	if len(data) > spec.MaxEnvelopeBytes {
		return nil, fail(ExitRefused, "sign", fmt.Errorf("the envelope would be %d bytes, more than the runtime's limit of %d (the payload is base64 inside it)", len(data), spec.MaxEnvelopeBytes), "shrink the payload")
	}
	if _, err := spec.ParseEnvelope(data); err != nil {
		return nil, fail(ExitUsage, "check the new envelope", err, "")
	}
	if err := env.writeOutput(out, data, 0o644); err != nil {
		return nil, writeErr("envelope", out, err)
	}
	return pub, nil
}

// infoFor is where a command that writes out reports what it did: stdout,
// unless out is stdout itself.
func (e *Env) infoFor(out string) io.Writer {
	if out == stdio {
		return e.Stderr
	}
	return e.Stdout
}
