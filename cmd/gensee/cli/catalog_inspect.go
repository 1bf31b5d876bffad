package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/trust"
	"github.com/gensee/gensee/spec"
)

type inspectOptions struct {
	catalog, trustedKey, config string
	json                        bool
}

func catalogInspectCommand() *Command {
	return &Command{
		Name:    "inspect",
		Summary: "verify a signed catalog with an explicit key and show what it approves",
		Args:    "[--catalog F | --config F] --trusted-key HEX|FILE [--json]",
		Long: `Applies the runtime's catalog rules (strict envelope, payloadType, signature
by the given key, strict payload, not expired, not issued in the future)
and prints the version, validity window, payload digest, contracts,
analyzers, selectors and verifiers (whose receipts gensee promote
accepts). A refusal exits 1 and names the rule (format, payload_type,
signature, expired, not_yet_valid, ...). This administrative
command is the only one that takes a trust key from its caller; it never
reads or moves the runtime's catalog high-water mark. Without --catalog it
inspects the catalog the operator config names (catalog = ...).

--json prints one object with sorted keys: schema
"gensee.catalog-inspect/v1", path, payload_type, keyid, version, issued_at,
expires_at, digest, contracts[] {id, version, digest, network {mode,
loopback, allow[]}, workspace, deadline, products[]}, analyzers[] (as in
the catalog, plus keyid), selectors[] (as in the catalog), verifiers[] (as
in the catalog, plus keyid).`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o inspectOptions
			fs.StringVar(&o.catalog, "catalog", "", "signed catalog envelope file `F` (default: the operator config's catalog)")
			addConfigFlag(fs, &o.config)
			fs.StringVar(&o.trustedKey, "trusted-key", "", "the catalog root public key `HEX|FILE`: 64 hex characters, or a file holding them")
			fs.BoolVar(&o.json, "json", false, "print the catalog as JSON")
			return o.run
		},
	}
}

// memState is a high-water store that remembers nothing: inspect verifies
// like the runtime but must never move the runtime's mark.
type memState struct{}

func (memState) Update(fn func(cur trust.State, found bool) (trust.State, bool, error)) error {
	_, _, err := fn(trust.State{}, false)
	return err
}

func (o *inspectOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"trusted-key": o.trustedKey}); err != nil {
		return err
	}
	if o.catalog == "" {
		cfg, err := env.operatorConfig(o.config)
		if err != nil {
			return err
		}
		o.catalog = cfg.Catalog
	} else if o.config != "" {
		return errUsage("--catalog and --config exclude each other")
	}
	key, err := env.trustedKey(o.trustedKey)
	if err != nil {
		return err
	}
	path, err := filepath.Abs(o.catalog)
	if err != nil {
		return fail(ExitUsage, "resolve "+o.catalog, err, "")
	}
	loaded, err := trust.LoadCatalog(path, key, memState{}, env.Now())
	if err != nil {
		return catalogRefusal(err)
	}
	view := inspectView(path, key, loaded)
	if o.json {
		if err := writeJSON(env.Stdout, view); err != nil {
			return fail(ExitUsage, "write report", err, "")
		}
		return nil
	}
	renderInspect(env.Stdout, view, env.Now())
	return nil
}

// catalogRefusal maps a trust.LoadCatalog error: file problems are I/O
// (exit 2), every other rule is a refusal (exit 1) named in the message.
func catalogRefusal(err error) error {
	var ce *trust.CatalogError
	if !errors.As(err, &ce) {
		return fail(ExitRefused, "refused", err, "")
	}
	switch ce.Rule {
	case trust.RuleMissing, trust.RuleIO, trust.RuleAbsolutePath:
		return fail(ExitUsage, fmt.Sprintf("read catalog (rule %q)", ce.Rule), err, "")
	}
	return fail(ExitRefused, fmt.Sprintf("refused by rule %q", ce.Rule), err, "")
}

// InspectView is catalog inspect's result.
type InspectView struct {
	Schema      string            `json:"schema"`
	Path        string            `json:"path"`
	PayloadType string            `json:"payload_type"`
	KeyID       string            `json:"keyid"`
	Version     uint64            `json:"version"`
	IssuedAt    time.Time         `json:"issued_at"`
	ExpiresAt   time.Time         `json:"expires_at"`
	Digest      string            `json:"digest"` // sha256 of the signed payload bytes
	Contracts   []InspectContract `json:"contracts"`
	Analyzers   []InspectAnalyzer `json:"analyzers"`
	Selectors   []spec.Selector   `json:"selectors"`
	Verifiers   []InspectVerifier `json:"verifiers"`
}

// InspectContract is one approved contract, with its spec.Digest.
type InspectContract struct {
	ID        string         `json:"id"`
	Version   int64          `json:"version"`
	Digest    string         `json:"digest"`
	Network   AuditNetwork   `json:"network"`
	Workspace string         `json:"workspace"`
	Deadline  string         `json:"deadline"`
	Products  []spec.Product `json:"products"`
}

// InspectVerifier is a catalog verifier plus the keyid of its key.
type InspectVerifier struct {
	spec.Verifier
	KeyID string `json:"keyid"`
}

// InspectAnalyzer is a catalog analyzer plus the keyid of its key.
type InspectAnalyzer struct {
	spec.Analyzer
	KeyID string `json:"keyid"`
}

func inspectView(path string, key ed25519.PublicKey, l *trust.Loaded) InspectView {
	c := l.Catalog
	v := InspectView{
		Schema: "gensee.catalog-inspect/v1", Path: path, PayloadType: spec.PayloadTypeCatalog,
		KeyID: spec.KeyID(key), Version: l.Version, IssuedAt: c.IssuedAt.UTC(), ExpiresAt: c.ExpiresAt.UTC(),
		Digest: l.Digest, Contracts: []InspectContract{}, Analyzers: []InspectAnalyzer{}, Selectors: []spec.Selector{},
		Verifiers: []InspectVerifier{},
	}
	for _, id := range c.ContractIDs() {
		ct, _ := c.Contract(id)
		d, err := spec.Digest(ct)
		if err != nil {
			d = "(" + err.Error() + ")"
		}
		g := grantsOf(&ct)
		v.Contracts = append(v.Contracts, InspectContract{ID: id, Version: ct.Version, Digest: d,
			Network: g.Network, Workspace: g.Workspace, Deadline: g.Deadline, Products: g.Products})
	}
	for _, a := range c.Analyzers {
		ia := InspectAnalyzer{Analyzer: a}
		if k, err := a.Key(); err == nil {
			ia.KeyID = spec.KeyID(k)
		}
		v.Analyzers = append(v.Analyzers, ia)
	}
	v.Selectors = append(v.Selectors, c.Selectors...)
	for _, vr := range c.Verifiers {
		iv := InspectVerifier{Verifier: vr}
		if k, err := vr.Key(); err == nil {
			iv.KeyID = spec.KeyID(k)
		}
		v.Verifiers = append(v.Verifiers, iv)
	}
	return v
}

func renderInspect(w io.Writer, v InspectView, now time.Time) {
	tw := table(w)
	row(tw, "catalog", v.Path)
	row(tw, "verified", "signed by keyid "+v.KeyID+" ("+v.PayloadType+")")
	row(tw, "version", fmt.Sprint(v.Version))
	row(tw, "issued_at", v.IssuedAt.Format(time.RFC3339))
	row(tw, "expires_at", v.ExpiresAt.Format(time.RFC3339)+" (in "+untilText(v.ExpiresAt.Sub(now))+")")
	row(tw, "digest", v.Digest)
	tw.Flush()

	fmt.Fprintf(w, "\nCONTRACTS\n")
	tw = table(w)
	row(tw, "  ID", "VERSION", "NETWORK", "PRODUCTS", "DIGEST")
	for _, c := range v.Contracts {
		row(tw, "  "+c.ID, fmt.Sprint(c.Version), networkText(c.Network), productsText(c.Products), c.Digest)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nANALYZERS\n")
	tw = table(w)
	row(tw, "  ID", "MODELS", "CLASSES", "MIN_CONFIDENCE_BP", "MIN_MARGIN_BP", "MAX_LIFETIME", "KEYID")
	for _, a := range v.Analyzers {
		row(tw, "  "+a.ID, strings.Join(a.Models, ","), strings.Join(a.Classes, ","), fmt.Sprint(a.MinConfidenceBP), fmt.Sprint(a.MinMarginBP), a.MaxLifetime, a.KeyID)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nSELECTORS\n")
	tw = table(w)
	row(tw, "  ID", "MATCH", "ROUTES", "SAFE_DEFAULT")
	for _, s := range v.Selectors {
		var routes []string
		for _, class := range slices.Sorted(maps.Keys(s.Routes)) {
			routes = append(routes, class+"->"+s.Routes[class])
		}
		row(tw, "  "+s.ID, matchText(s.Match), orDash(strings.Join(routes, ",")), orDash(s.SafeDefault))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nVERIFIERS\n")
	if len(v.Verifiers) == 0 {
		fmt.Fprintf(w, "  none: gensee promote accepts no receipt under this catalog\n")
		return
	}
	tw = table(w)
	row(tw, "  ID", "CLASSES", "MAX_LIFETIME", "KEYID")
	for _, vr := range v.Verifiers {
		row(tw, "  "+vr.ID, strings.Join(vr.Classes, ","), vr.MaxLifetime, vr.KeyID)
	}
	tw.Flush()
}

func networkText(n AuditNetwork) string {
	s := n.Mode
	if len(n.Allow) > 0 {
		s += fmt.Sprintf(" (%d tuples)", len(n.Allow))
	}
	if n.Loopback == spec.LoopbackAllow {
		s += ", loopback allowed"
	}
	return s
}

func productsText(ps []spec.Product) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Class+":"+p.Slot)
	}
	return orDash(strings.Join(out, ","))
}

func matchText(m spec.SelectorMatch) string {
	var out []string
	for _, f := range []struct{ k, v string }{
		{"containerd_namespace", m.ContainerdNamespace}, {"runtime", m.Runtime}, {"k8s_namespace", m.K8sNamespace},
	} {
		if f.v != "" {
			out = append(out, f.k+"="+f.v)
		}
	}
	return strings.Join(out, " ")
}

// untilText renders a remaining validity: days beyond two days, else
// minutes.
func untilText(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.Round(time.Minute).String()
}
