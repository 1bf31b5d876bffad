package spec

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Patterns shared by validation and the JSON Schemas. TestPatternsAgree and
// TestSchemaPatternsMatchGo keep them in step with the hand-written matchers
// and with spec/schemas/*.json.
const (
	// Identifiers: contract, analyzer and selector ids, and classes.
	idPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`
	// Model ids may carry an organisation and a revision ("org/model@v1").
	modelPattern = `^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$`
	// Go durations without sign: "15m", "1h30m", "1.5s".
	durationPattern = `^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`
	// Product file modes: four octal digits.
	modePattern = `^[0-7]{4}$`
)

const (
	maxFactLen   = 253
	maxPathLen   = 4096
	maxBP        = 10000
	maxAllow     = 1024
	maxProducts  = 64
	maxModes     = 16
	maxCandidate = 16
)

// isID is idPattern without a regexp (ids are checked thousands of times
// per catalog); TestPatternsAgree keeps the two in step.
func isID(s string) bool { return isWord(s, 128, "._-") }

// isModel is modelPattern without a regexp.
func isModel(s string) bool { return isWord(s, 256, "._:/@+-") }

// isMode is modePattern without a regexp.
func isMode(s string) bool {
	if len(s) != 4 {
		return false
	}
	for i := 0; i < 4; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// isWord: 1..max ASCII characters, the first alphanumeric, the rest
// alphanumeric or in extra.
func isWord(s string, max int, extra string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune(extra, rune(c))) {
			return false
		}
	}
	return true
}

// checkID reports a missing or malformed identifier.
func checkID(p problems, path, what, s string) {
	switch {
	case s == "":
		p.addf(path, "%s is required", what)
	case !isID(s):
		p.addf(path, "%q is not a valid %s: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", s, what)
	}
}

func checkModel(p problems, path, s string) {
	switch {
	case s == "":
		p.add(path, "model id is required")
	case !isModel(s):
		p.addf(path, "%q is not a valid model id: use 1-256 letters, digits or . _ : / @ + -, starting with a letter or digit", s)
	}
}

// checkHex64 reports s unless it is 64 lowercase hex characters.
func checkHex64(p problems, path, what, s string) {
	if s == "" {
		p.addf(path, "is required: %s as 64 lowercase hex characters", what)
	} else if !IsHex64(s) {
		p.addf(path, "%s must be 64 lowercase hex characters, got %q", what, truncate(s, 80))
	}
}

// checkDigest reports s unless it is "sha256:" and 64 lowercase hex.
func checkDigest(p problems, path, s string) {
	h, ok := strings.CutPrefix(s, "sha256:")
	if s == "" {
		p.add(path, "is required: \"sha256:\" followed by 64 lowercase hex characters")
	} else if !ok || !IsHex64(h) {
		p.addf(path, "must be \"sha256:\" followed by 64 lowercase hex characters, got %q", truncate(s, 80))
	}
}

// parseDuration parses a positive, unsigned Go duration.
func parseDuration(s string) (time.Duration, error) {
	if !regexp.MustCompile(durationPattern).MatchString(s) { // compiled per call: no package state
		return 0, fmt.Errorf("%q is not a Go duration such as \"15m\" or \"1h30m\"", truncate(s, 80))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", truncate(s, 80), err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q must be positive", s)
	}
	return d, nil
}

func checkDuration(p problems, path, s string) {
	if _, err := parseDuration(s); err != nil {
		p.add(path, err.Error())
	}
}

// checkWindow requires both times and issued < expires.
func checkWindow(p problems, issued, expires time.Time) {
	if issued.IsZero() {
		p.add("issued_at", "is required (RFC 3339 time)")
	}
	if expires.IsZero() {
		p.add("expires_at", "is required (RFC 3339 time)")
	}
	if !issued.IsZero() && !expires.IsZero() && !issued.Before(expires) {
		p.addf("expires_at", "%s is not after issued_at %s", expires.Format(time.RFC3339), issued.Format(time.RFC3339))
	}
}

// checkSchema requires the document's schema identifier.
func checkSchema(p problems, got, want string) {
	if got != want {
		p.addf("schema", "must be %q, got %q", want, truncate(got, 80))
	}
}

// printable reports whether s is non-empty and free of spaces and control
// characters, as facts and match values must be.
func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Truncate is s cut to at most n bytes on a rune boundary, "..." marking
// the cut: how a message quotes an input of any length.
func Truncate(s string, n int) string { return truncate(s, n) }

// truncate shortens s for error messages, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
