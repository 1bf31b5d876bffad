package spec

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	testIssued  = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	testExpires = testIssued.AddDate(1, 0, 0)
)

// validCatalog is the docs/design.md §3 example with a real analyzer key.
func validCatalog() Catalog {
	c := validContract()
	return Catalog{
		Schema: SchemaCatalog, Version: 3, IssuedAt: testIssued, ExpiresAt: testExpires,
		Contracts: map[string]Contract{c.ID: c},
		Analyzers: []Analyzer{{
			ID: "ref-analyzer", Models: []string{"ref-model-1"}, PublicKey: hex.EncodeToString(pub(testKey(9))),
			Classes: []string{"build", "fetch"}, MinConfidenceBP: 8000, MinMarginBP: 500, MaxLifetime: "1h",
		}},
		Selectors: []Selector{{
			ID:     "ci-builds",
			Match:  SelectorMatch{ContainerdNamespace: "builds", Runtime: "io.containerd.gensee.v2"},
			Routes: map[string]string{"build": c.ID}, SafeDefault: c.ID,
		}},
	}
}

func TestCatalogValidate(t *testing.T) {
	const cid = "offline-structured-result"
	tests := []struct {
		name string
		edit func(*Catalog)
		want []string
	}{
		{"valid", func(*Catalog) {}, nil},
		{"schema", func(c *Catalog) { c.Schema = "gensee.catalog/v2" }, []string{`schema: must be "gensee.catalog/v1"`}},
		{"version", func(c *Catalog) { c.Version = 0 }, []string{"version: must be at least 1"}},
		{"times missing", func(c *Catalog) { c.IssuedAt, c.ExpiresAt = time.Time{}, time.Time{} },
			[]string{"issued_at: is required", "expires_at: is required"}},
		{"times reversed", func(c *Catalog) { c.ExpiresAt = c.IssuedAt }, []string{"expires_at: 2026-11-29T00:00:00Z is not after issued_at"}},
		{"no contracts", func(c *Catalog) { c.Contracts = nil; c.Selectors[0].Routes = nil; c.Selectors[0].SafeDefault = "" },
			[]string{"contracts: at least one contract is required", "selectors[0]: admits nothing"}},
		{"key mismatch", func(c *Catalog) { ct := c.Contracts[cid]; ct.ID = "other"; c.Contracts[cid] = ct },
			[]string{`contracts.offline-structured-result.id: "other" must equal its key`}},
		{"contract invalid", func(c *Catalog) {
			ct := c.Contracts[cid]
			ct.Network = allowExact(AllowRule{IP: "example.com", Proto: "tcp", Port: 443})
			c.Contracts[cid] = ct
		}, []string{`contracts.offline-structured-result.network.allow[0].ip: "example.com" is a hostname`}},
		{"analyzer id", func(c *Catalog) { c.Analyzers[0].ID = "" }, []string{"analyzers[0].id: analyzer id is required"}},
		{"analyzer dup", func(c *Catalog) { c.Analyzers = append(c.Analyzers, c.Analyzers[0]) },
			[]string{`analyzers[1].id: "ref-analyzer" duplicates analyzers[0].id`}},
		{"no models", func(c *Catalog) { c.Analyzers[0].Models = nil }, []string{"analyzers[0].models: at least one model"}},
		{"model bad and dup", func(c *Catalog) { c.Analyzers[0].Models = []string{"org/m@v1", "", "org/m@v1"} },
			[]string{"analyzers[0].models[1]: model id is required", `analyzers[0].models[2]: "org/m@v1" duplicates models[0]`}},
		{"key short", func(c *Catalog) { c.Analyzers[0].PublicKey = "abcd" }, []string{"analyzers[0].public_key: an ed25519 public key must be 64 lowercase hex"}},
		{"key upper", func(c *Catalog) { c.Analyzers[0].PublicKey = strings.ToUpper(c.Analyzers[0].PublicKey) },
			[]string{"analyzers[0].public_key: an ed25519 public key must be 64 lowercase hex"}},
		{"no classes", func(c *Catalog) { c.Analyzers[0].Classes = nil; c.Selectors[0].Routes = nil },
			[]string{"analyzers[0].classes: at least one class"}},
		{"class dup", func(c *Catalog) { c.Analyzers[0].Classes = []string{"build", "build"} },
			[]string{`analyzers[0].classes[1]: "build" duplicates classes[0]`}},
		{"bp range", func(c *Catalog) { c.Analyzers[0].MinConfidenceBP = 10001; c.Analyzers[0].MinMarginBP = -1 },
			[]string{"analyzers[0].min_confidence_bp: 10001 is out of range 0-10000", "analyzers[0].min_margin_bp: -1 is out of range"}},
		{"lifetime missing", func(c *Catalog) { c.Analyzers[0].MaxLifetime = "" }, []string{"analyzers[0].max_lifetime: is required"}},
		{"lifetime bad", func(c *Catalog) { c.Analyzers[0].MaxLifetime = "1d" }, []string{`analyzers[0].max_lifetime: "1d" is not a Go duration`}},
		{"no selectors", func(c *Catalog) { c.Selectors = nil }, []string{"selectors: at least one selector"}},
		{"selector id dup", func(c *Catalog) {
			s := c.Selectors[0]
			s.Match.K8sNamespace = "x"
			c.Selectors = append(c.Selectors, s)
		}, []string{`selectors[1].id: "ci-builds" duplicates selectors[0].id`}},
		{"same match", func(c *Catalog) {
			s := c.Selectors[0]
			s.ID = "other"
			c.Selectors = append(c.Selectors, s)
		}, []string{"selectors[1].match: matches the same facts as selectors[0]"}},
		{"empty match", func(c *Catalog) { c.Selectors[0].Match = SelectorMatch{} }, []string{"selectors[0].match: at least one of"}},
		{"match spaces", func(c *Catalog) { c.Selectors[0].Match.K8sNamespace = "a b" }, []string{`selectors[0].match.k8s_namespace: "a b" must be`}},
		{"route unknown contract", func(c *Catalog) { c.Selectors[0].Routes["fetch"] = "nope" },
			[]string{`selectors[0].routes.fetch: "nope" is not a contract in this catalog`}},
		{"route class out of scope", func(c *Catalog) { c.Selectors[0].Routes["deploy"] = cid },
			[]string{`selectors[0].routes.deploy: class "deploy" is in no analyzer's classes`}},
		{"safe default unknown", func(c *Catalog) { c.Selectors[0].SafeDefault = "nope" },
			[]string{`selectors[0].safe_default: "nope" is not a contract`}},
		{"safe default only", func(c *Catalog) { c.Selectors[0].Routes = nil }, nil},
		{"admits nothing", func(c *Catalog) { c.Selectors[0].Routes = nil; c.Selectors[0].SafeDefault = "" },
			[]string{"selectors[0]: admits nothing"}},
		{"verifier", func(c *Catalog) { c.Verifiers = []Verifier{validVerifier()} }, nil},
		{"verifier id dup", func(c *Catalog) { c.Verifiers = []Verifier{validVerifier(), validVerifier()} },
			[]string{`verifiers[1].id: "json-schema" duplicates verifiers[0].id`}},
		{"verifier id bad", func(c *Catalog) { v := validVerifier(); v.ID = "-x"; c.Verifiers = []Verifier{v} },
			[]string{`verifiers[0].id: "-x" is not a valid verifier id`}},
		{"verifier key", func(c *Catalog) { v := validVerifier(); v.PublicKey = ""; c.Verifiers = []Verifier{v} },
			[]string{"verifiers[0].public_key: is required"}},
		{"verifier no classes", func(c *Catalog) { v := validVerifier(); v.Classes = nil; c.Verifiers = []Verifier{v} },
			[]string{"verifiers[0].classes: at least one product class"}},
		{"verifier class unknown and dup", func(c *Catalog) {
			v := validVerifier()
			v.Classes = []string{"build", "blob", "blob"}
			c.Verifiers = []Verifier{v}
		}, []string{`verifiers[0].classes[0]: "build" is not a product class`, `verifiers[0].classes[2]: "blob" duplicates classes[1]`}},
		{"verifier lifetime missing", func(c *Catalog) { v := validVerifier(); v.MaxLifetime = ""; c.Verifiers = []Verifier{v} },
			[]string{"verifiers[0].max_lifetime: is required"}},
		{"verifier lifetime zero", func(c *Catalog) { v := validVerifier(); v.MaxLifetime = "0s"; c.Verifiers = []Verifier{v} },
			[]string{`verifiers[0].max_lifetime: "0s" must be positive`}},
		{"verifier lifetime negative", func(c *Catalog) { v := validVerifier(); v.MaxLifetime = "-1h"; c.Verifiers = []Verifier{v} },
			[]string{`verifiers[0].max_lifetime: "-1h" is not a Go duration`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCatalog()
			tt.edit(&c)
			wantErrors(t, c.Validate(), tt.want...)
		})
	}
}

func signCatalog(t *testing.T, c Catalog, typ string, keys ...ed25519.PrivateKey) []byte {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	env, err := SignEnvelope(typ, payload, keys...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenCatalog(t *testing.T) {
	root := testKey(1)
	anchors := []ed25519.PublicKey{pub(root)}
	c, err := OpenCatalog(signCatalog(t, validCatalog(), PayloadTypeCatalog, root), anchors, 1)
	if err != nil || c.Version != 3 || c.Analyzer("ref-analyzer") == nil || c.Analyzer("x") != nil {
		t.Fatalf("OpenCatalog = %+v, %v", c, err)
	}
	if _, err := OpenCatalog(signCatalog(t, validCatalog(), PayloadTypeInference, root), anchors, 1); !errors.Is(err, ErrPayloadType) {
		t.Fatalf("wrong type: %v", err)
	}
	if _, err := OpenCatalog(signCatalog(t, validCatalog(), PayloadTypeCatalog, testKey(2)), anchors, 1); !errors.Is(err, ErrSignature) {
		t.Fatalf("wrong key: %v", err)
	}
	bad := validCatalog()
	bad.Version = 0
	if _, err := OpenCatalog(signCatalog(t, bad, PayloadTypeCatalog, root), anchors, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid payload: %v", err)
	}
}
