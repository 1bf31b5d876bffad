package spec

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The node analyzer protocol (docs/design.md §3.1): the runtime sends an
// AnalyzerRequest as the body of POST AnalyzerPath over HTTP/1.1 on the
// selector's unix socket and reads one AnalyzerAnswer. The answer's
// inference is verified exactly as an annotation's, against the key of the
// analyzer the selector names; anything else is "no inference".
const (
	SchemaAnalyzerRequest = "gensee.analyzer-request/v1"
	SchemaAnalyzerAnswer  = "gensee.analyzer-answer/v1"
	SchemaAnalyzerRules   = "gensee.analyzer-rules/v1"

	PayloadTypeAnalyzerRules = "application/vnd.gensee.analyzer-rules.v1+json"

	AnalyzerPath = "/v1/infer"

	// MaxAnalyzerTimeout bounds a selector's analyzer timeout: Create
	// waits for the answer before any image code runs.
	MaxAnalyzerTimeout = 5 * time.Second
	// MaxHistoryRefs bounds the earlier manifests a request names.
	MaxHistoryRefs = 16
	// MaxAnalyzerAnswer bounds the answer the runtime reads.
	MaxAnalyzerAnswer = 64 << 10
	// MaxAnalyzerRequest bounds the request an analyzer reads: twice the
	// largest config.json the runtime reads (4 MiB), so a process's env
	// and the names it left out (one per Service link) always fit.
	MaxAnalyzerRequest = 8 << 20
)

// Doors of a request (AnalyzerRequest.Door).
const (
	DoorShim  = "shim"  // containerd: ctr, CRI, BuildKit's containerd worker
	DoorHooks = "hooks" // the OCI hook (podman, CRI-O)
	DoorHost  = "host"  // gensee boundary run
)

// AnalyzerRequest is what the runtime tells an analyzer: the observation
// it re-derived (volatile env already left out), the command it digests,
// and what else the door knows. Image and History are claims to weigh, not
// facts the observation binds.
type AnalyzerRequest struct {
	Schema            string      `json:"schema"`   // SchemaAnalyzerRequest
	Analyzer          string      `json:"analyzer"` // the catalog analyzer the selector names
	Selector          string      `json:"selector"`
	Door              string      `json:"door"`
	Observation       Observation `json:"observation"`
	ObservationDigest string      `json:"observation_digest"`
	// Command is what Observation.CommandDigest covers: args, the env
	// with the volatile entries left out, cwd.
	Command Command `json:"command"`
	// Image is the image reference CRI wrote for the container
	// (io.kubernetes.cri.image-name); empty elsewhere.
	Image string `json:"image,omitempty"`
	// History names up to MaxHistoryRefs earlier manifests of the same
	// observation digest admitted under this analyzer's inferences: the
	// unclean ones first, each group newest first (shim/record History).
	History []HistoryRef `json:"history,omitempty"`
}

// HistoryRef names an earlier operation's manifest in the runtime's
// records and the sha256 of its bytes when written.
type HistoryRef struct {
	OperationID    string `json:"operation_id"`
	ManifestSHA256 string `json:"manifest_sha256"`
}

// AnalyzerAnswer is an analyzer's reply: a DSSE envelope of an Inference,
// or the reason it names no class (novel, tie, low confidence).
type AnalyzerAnswer struct {
	Schema    string          `json:"schema"` // SchemaAnalyzerAnswer
	Inference json.RawMessage `json:"inference,omitempty"`
	NoClass   string          `json:"no_class,omitempty"`
}

// AnalyzerRules is the signed rule set of the reference analyzer
// (payloadType PayloadTypeAnalyzerRules, signed by the catalog analyzer's
// rules_key).
type AnalyzerRules struct {
	Schema    string         `json:"schema"`   // SchemaAnalyzerRules
	Analyzer  string         `json:"analyzer"` // the catalog analyzer these rules are for
	Version   uint64         `json:"version"`
	IssuedAt  time.Time      `json:"issued_at"`
	ExpiresAt time.Time      `json:"expires_at"`
	Rules     []AnalyzerRule `json:"rules"`
	History   *HistoryPolicy `json:"history,omitempty"`
}

// AnalyzerRule gives Class at ConfidenceBP to an observation that matches
// every set field: one of ExecutableSHA256 (required: a rule is about
// code the operator hashed, never about whatever binary a caller names),
// narrowed by Argv (one pattern per argument: "*" any, "x*" a prefix,
// else exact; "**" as the last pattern matches any remaining arguments),
// one of Image, and Env: exact "NAME=value" entries the command's
// environment must contain. A command whose environment sets a name
// ProtectedEnv protects (other than PATH) matches only a rule whose Env
// pins that exact entry.
type AnalyzerRule struct {
	ID               string   `json:"id"`
	Class            string   `json:"class"`
	ConfidenceBP     int      `json:"confidence_bp"`
	ExecutableSHA256 []string `json:"executable_sha256,omitempty"`
	Argv             []string `json:"argv,omitempty"`
	Image            []string `json:"image,omitempty"`
	Env              []string `json:"env,omitempty"`
}

// maxRuleEnv bounds a rule's env entries.
const maxRuleEnv = 64

// HistoryPolicy is how much earlier clean runs raise a rule's confidence:
// PerRunBP for each earlier operation of the same observation digest
// admitted under the same class by this analyzer's inference that ended
// clean (Manifest.HistoryVerdict), at most MaxBP in all; one unclean run
// under the class withholds the class for as long as its record is kept.
type HistoryPolicy struct {
	PerRunBP int `json:"per_run_bp"`
	MaxBP    int `json:"max_bp"`
}

// Validate checks a selector analyzer reference's shape (its id's
// existence is the catalog's check).
func (a *SelectorAnalyzer) check(p problems) {
	checkID(p, "id", "analyzer id", a.ID)
	switch {
	case a.Endpoint == "":
		p.add("endpoint", "is required: the absolute path of the analyzer's unix socket, e.g. /run/gensee/analyzer.sock")
	case !filepath.IsAbs(a.Endpoint) || filepath.Clean(a.Endpoint) != a.Endpoint || len(a.Endpoint) > 107 || strings.ContainsRune(a.Endpoint, 0):
		p.addf("endpoint", "%q must be a clean absolute path of at most 107 bytes (a unix socket)", truncate(a.Endpoint, 120))
	}
	if a.Timeout == "" {
		p.add("timeout", "is required: a Go duration such as \"200ms\" (at most 5s)")
	} else if d, err := parseDuration(a.Timeout); err != nil {
		p.add("timeout", err.Error())
	} else if d > MaxAnalyzerTimeout {
		p.addf("timeout", "%s exceeds %s: Create waits for the analyzer before any image code runs", a.Timeout, MaxAnalyzerTimeout)
	}
}

// AnalyzerTimeout is the selector analyzer's timeout (Validate checked it).
func (a *SelectorAnalyzer) AnalyzerTimeout() time.Duration {
	d, _ := parseDuration(a.Timeout)
	return d
}

func (c *Catalog) checkSelectorAnalyzer(p problems, a *SelectorAnalyzer) {
	if a == nil {
		return
	}
	ap := p.at("analyzer")
	a.check(ap)
	if a.ID != "" && c.Analyzer(a.ID) == nil {
		ap.addf("id", "%q is not an analyzer of this catalog", truncate(a.ID, 80))
	}
}

// checkVolatileNames validates an observation's volatile_env: sorted,
// distinct variable names, none of them protected. It sets no bound of
// its own: the list is what the selector's patterns matched in the
// process's env, bounded by the document's size (a cap here would let
// whoever adds Services to a namespace refuse every pod in it).
func checkVolatileNames(p problems, names []string) {
	for i, n := range names {
		switch {
		case n == "" || strings.ContainsAny(n, "=\x00"):
			p.addf(joinIndex("volatile_env", i), "%q is not an environment variable name", truncate(n, 80))
		case ProtectedEnv(n):
			p.addf(joinIndex("volatile_env", i), "%q is never left out of a command digest", n)
		case i > 0 && names[i-1] >= n:
			p.add(joinIndex("volatile_env", i), "names must be sorted and distinct")
		}
	}
}

// Validate checks an analyzer rule set: schema, analyzer id, version,
// validity window, and each rule.
func (r *AnalyzerRules) Validate() error {
	p := newProblems()
	checkSchema(p, r.Schema, SchemaAnalyzerRules)
	checkID(p, "analyzer", "analyzer id", r.Analyzer)
	if r.Version < 1 {
		p.add("version", "must be at least 1")
	}
	checkWindow(p, r.IssuedAt, r.ExpiresAt)
	ids := map[string]int{}
	for i, rule := range r.Rules {
		rp := p.at(joinIndex("rules", i))
		checkEntryID(rp, "rule id", "rules", i, rule.ID, ids)
		checkID(rp, "class", "class", rule.Class)
		checkBP(rp, "confidence_bp", rule.ConfidenceBP)
		rule.check(rp)
	}
	if h := r.History; h != nil {
		checkBP(p, "history.per_run_bp", h.PerRunBP)
		checkBP(p, "history.max_bp", h.MaxBP)
	}
	return p.err()
}

// check validates a rule's match fields: an executable set (argv, image
// and env only narrow it), argv patterns, images, env entries.
func (rule *AnalyzerRule) check(rp problems) {
	if len(rule.ExecutableSHA256) == 0 {
		rp.add("executable_sha256", "is required: a rule classes executables the operator hashed (argv, image and env only narrow it); argv or an image alone is met by any binary a caller names")
	}
	checkUnique(rp, "executable_sha256", rule.ExecutableSHA256, func(ep problems, s string) { checkHex64(ep, "", "executable_sha256", s) })
	for j, a := range rule.Argv {
		if a == "**" && j != len(rule.Argv)-1 {
			rp.add(joinIndex("argv", j), "\"**\" may only be the last pattern")
		}
	}
	checkUnique(rp, "image", rule.Image, func(ip problems, s string) {
		if !printable(s) || len(s) > 512 {
			ip.addf("", "%q must be 1-512 printable characters without spaces", truncate(s, 80))
		}
	})
	if len(rule.Env) > maxRuleEnv {
		rp.addf("env", "has %d entries; at most %d", len(rule.Env), maxRuleEnv)
	}
	names := map[string]bool{}
	for j, e := range rule.Env {
		name, _, ok := strings.Cut(e, "=")
		switch {
		case !ok || !ValidEnvName(name) || len(name) > 128 || len(e) > 4096 || strings.ContainsRune(e, 0):
			rp.addf(joinIndex("env", j), "%q is not a NAME=value entry (a portable name, at most 4096 bytes, no NUL)", truncate(name, 80))
		case names[name]:
			rp.addf(joinIndex("env", j), "names %s again: a command's entry has one value", name)
		}
		names[name] = true
	}
}

// MatchArgv reports whether args match the rule's argv patterns.
func MatchArgv(patterns, args []string) bool {
	for i, pat := range patterns {
		if pat == "**" && i == len(patterns)-1 {
			return true
		}
		if i >= len(args) {
			return false
		}
		switch {
		case pat == "*":
		case len(pat) > 1 && strings.HasSuffix(pat, "*"):
			if !strings.HasPrefix(args[i], strings.TrimSuffix(pat, "*")) {
				return false
			}
		case pat != args[i]:
			return false
		}
	}
	return len(args) == len(patterns)
}

// Validate checks a request's shape: schema, ids, door, observation and
// its digest, history bound.
func (q *AnalyzerRequest) Validate() error {
	p := newProblems()
	checkSchema(p, q.Schema, SchemaAnalyzerRequest)
	checkID(p, "analyzer", "analyzer id", q.Analyzer)
	checkID(p, "selector", "selector id", q.Selector)
	if !slices.Contains([]string{DoorShim, DoorHooks, DoorHost}, q.Door) {
		p.addf("door", "%q is not shim, hooks or host", truncate(q.Door, 40))
	}
	if err := q.Observation.Validate(); err != nil {
		p.addf("observation", "%v", err)
	}
	checkDigest(p, "observation_digest", q.ObservationDigest)
	if len(q.History) > MaxHistoryRefs {
		p.addf("history", "has %d references; at most %d", len(q.History), MaxHistoryRefs)
	}
	return p.err()
}
