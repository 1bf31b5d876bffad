package spec

import (
	"regexp"
	"strings"
	"testing"
)

// patternCases exercise the hand-written matchers against the regexps the
// JSON Schemas use.
var patternCases = []string{
	"", "a", "A9", "-a", ".a", "_a", "a-b.c_d", "a b", "a/b", "org/model@v1", "m:1+2", "é", "a\n",
	strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("a", 256), strings.Repeat("a", 257),
	"0644", "7777", "0800", "644", "06444", "０６４４",
}

func TestPatternsAgree(t *testing.T) {
	for _, pc := range []struct {
		pattern string
		fn      func(string) bool
	}{{idPattern, isID}, {modelPattern, isModel}, {modePattern, isMode}} {
		re := regexp.MustCompile(pc.pattern)
		for _, s := range patternCases {
			if re.MatchString(s) != pc.fn(s) {
				t.Errorf("%s on %q: regexp %v, matcher %v", pc.pattern, s, re.MatchString(s), pc.fn(s))
			}
		}
	}
}

// TestSchemaPatternsMatchGo keeps the Go pattern constants and the schema
// files in step.
func TestSchemaPatternsMatchGo(t *testing.T) {
	contract, _ := Schema("contract")
	catalog, _ := Schema("catalog")
	for name, want := range map[string]string{"id": idPattern, "duration": durationPattern, "mode": modePattern} {
		if !strings.Contains(string(contract), jsonQuote(want)) {
			t.Errorf("contract.json lacks the %s pattern %s", name, want)
		}
	}
	if !strings.Contains(string(catalog), jsonQuote(modelPattern)) {
		t.Errorf("catalog.json lacks the model pattern %s", modelPattern)
	}
}

func jsonQuote(s string) string {
	b, _ := marshalNoHTML(s)
	return string(b)
}

func TestDurations(t *testing.T) {
	for s, ok := range map[string]bool{
		"15m": true, "1h30m": true, "1.5s": true, ".5s": true, "5.s": true, "10µs": true, "10us": true, "1ns": true,
		"": false, "0": false, "0s": false, "-1s": false, "+1s": false, "1d": false, "1 h": false, "h": false, "1h ": false,
	} {
		if _, err := parseDuration(s); (err == nil) != ok {
			t.Errorf("parseDuration(%q) err = %v, want ok %v", s, err, ok)
		}
	}
}

func TestTruncate(t *testing.T) {
	if got := truncate("ééé", 3); got != "é..." {
		t.Fatalf("truncate = %q", got)
	}
	if got := TruncateDetail(strings.Repeat("é", 400)); len([]rune(got)) != MaxEventDetail {
		t.Fatalf("TruncateDetail: %d runes", len([]rune(got)))
	}
	if got := TruncateDetail("short"); got != "short" {
		t.Fatal(got)
	}
}
