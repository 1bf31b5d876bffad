package events

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/spec"
)

// Redacted replaces every secret Redact finds.
const Redacted = "[REDACTED]"

// rule is one redaction: every match of re is replaced by repl (regexp
// expansion syntax), or by repl applied through fn when fn is set. need
// is a condition every string re matches meets (a literal re requires, a
// run it needs): a string without it is left as it is, and re never runs
// on it. Most details carry no candidate secret, and the
// ten regexps cost ~0.3 ms per event here. A rule's regexp is compiled
// the first time a string meets its need: most shims compile none.
type rule struct {
	re   func() *regexp.Regexp
	repl string
	fn   func(match string) string
	need func(s string) bool
}

// redactions run in order. Order matters: a rule that replaces a whole
// region (a key block, a header line) runs before one that would match only
// part of it, so no remainder of a secret survives a partial match.
// Compiled once; never mutated.
func redactions() []rule {
	return []rule{
		// PEM private keys, including a block cut off before its END line.
		{re: lazy(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|$)`), repl: Redacted,
			need: func(s string) bool { return strings.Contains(s, "-----BEGIN ") }},
		// Authorization / Proxy-Authorization headers: the rest of the line.
		{re: lazy(`(?i)\b((?:proxy-)?authorization)(\s*[:=]\s*)[^\r\n"']*`), repl: "${1}${2}" + Redacted,
			need: foldHasAny("authorization")},
		// Bearer and Basic credentials anywhere (no word boundary: a
		// prefix glued to "Bearer" must not save the token).
		{re: lazy(`(?i)(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+`), repl: "${1}${2}" + Redacted,
			need: foldHasAny("bearer", "basic")},
		// user:password@ in URLs.
		{re: lazy(`([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@`), repl: "${1}:" + Redacted + "@",
			need: func(s string) bool { i := strings.Index(s, "://"); return i >= 0 && strings.Contains(s[i:], "@") }},
		// key=value and "key": "value" where the key names a secret.
		{re: lazy(`(?i)([A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|token|secret|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|session[_-]?key)[A-Za-z0-9_.-]*["']?\s*[:=]\s*)("[^"]*"?|'[^']*'?|[^\s&,;"']+)`), repl: "${1}" + Redacted,
			// Every keyword holds one of these; a colon or an equals sign follows it.
			need: func(s string) bool {
				return strings.ContainsAny(s, ":=") && foldHasAny("pass", "pwd", "token", "secret", "key", "credential")(s)
			}},
		// Well-known token shapes.
		{re: lazy(`(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}`), repl: Redacted,
			need: hasAny("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "ABIA", "ACCA")},
		{re: lazy(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{30,}|sk-[A-Za-z0-9_-]{20,}|glpat-[A-Za-z0-9_-]{20,})`), repl: Redacted,
			need: hasAny("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza", "sk-", "glpat-")},
		// JSON Web Tokens.
		{re: lazy(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), repl: Redacted,
			need: hasAny("eyJ")},
		// Long hex runs (keys, tokens), except digests named as such.
		{re: lazy(`(?i)(sha(?:1|224|256|384|512):)?\b[0-9a-f]{32,}\b`), fn: keepDigest,
			need: runOf(32, func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' })},
		// Long base64 runs with mixed case and digits (AWS secret keys and
		// the like). A run starting with '/' is a path and is kept.
		{re: lazy(`/?[A-Za-z0-9+/_-]{32,}={0,2}`), fn: base64Secret,
			need: runOf(32, func(c byte) bool {
				return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z' || c == '+' || c == '/' || c == '_' || c == '-'
			})},
	}
}

// rules are built on first use, not at init, and each regexp on the
// first string that needs it: every shim process (the start and delete
// actions too, both on a container's start and delete path) would pay for
// ten regexps only the long-lived shim uses, and that one rarely needs
// any. Read-only once built.
var rules = sync.OnceValue(redactions)

// lazy compiles pattern on the first call.
func lazy(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// hasAny is a need: s holds one of the literals.
func hasAny(lits ...string) func(string) bool {
	return func(s string) bool {
		for _, l := range lits {
			if strings.Contains(s, l) {
				return true
			}
		}
		return false
	}
}

// foldHasAny is the need of a (?i) rule: s holds one of the (lower-case
// ASCII) literals in any case. A string with a byte outside ASCII always
// meets it: (?i) also folds the Kelvin sign into k and the long s into s,
// which an ASCII lower-casing would miss.
func foldHasAny(lits ...string) func(string) bool {
	has := hasAny(lits...)
	return func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return true
			}
		}
		return has(strings.ToLower(s))
	}
}

// runOf is a need: s holds n bytes in a row that class accepts.
func runOf(n int, class func(byte) bool) func(string) bool {
	return func(s string) bool {
		run := 0
		for i := 0; i < len(s); i++ {
			if !class(s[i]) {
				run = 0
			} else if run++; run >= n {
				return true
			}
		}
		return false
	}
}

func keepDigest(m string) string {
	if i := strings.IndexByte(m, ':'); i > 0 && strings.HasPrefix(strings.ToLower(m), "sha") {
		return m
	}
	return Redacted
}

func base64Secret(m string) string {
	if strings.HasPrefix(m, "/") {
		return m
	}
	var up, low, dig bool
	for _, c := range m {
		switch {
		case c >= 'A' && c <= 'Z':
			up = true
		case c >= 'a' && c <= 'z':
			low = true
		case c >= '0' && c <= '9':
			dig = true
		}
	}
	if up && low && dig {
		return Redacted
	}
	return m
}

// Redact replaces credentials, tokens and key material in s with
// [REDACTED], then makes it one line of at most spec.MaxEventDetail
// characters. Redaction runs on the whole input before it is cut, so a
// secret cannot survive by straddling the cut.
func Redact(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for _, r := range rules() {
		if r.need(s) {
			s = r.apply(s)
		}
	}
	return spec.TruncateDetail(oneLine(s))
}

// apply replaces every match of the rule in s.
func (r rule) apply(s string) string {
	if r.fn != nil {
		return r.re().ReplaceAllStringFunc(s, r.fn)
	}
	return r.re().ReplaceAllString(s, r.repl)
}

// oneLine turns control characters and runs of white space into single
// spaces and trims the ends.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		if unicode.Is(unicode.Cf, r) { // format characters: bidi overrides, zero-width spaces
			return '\uFFFD'
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// Sanitize returns e ready for a sink: Detail and Hint redacted and cut to
// one line, Target, Rule and Control on one line. Every sink calls it.
func Sanitize(e spec.Event) spec.Event {
	e.Detail = Redact(e.Detail)
	e.Hint = Redact(e.Hint)
	e.Target = spec.TruncateDetail(oneLine(e.Target))
	e.Rule = spec.TruncateDetail(oneLine(e.Rule))
	e.Control = spec.TruncateDetail(oneLine(e.Control))
	return e
}
