package gate

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestCheckJSON(t *testing.T) {
	cases := map[string]string{ // input -> rule ("" = valid)
		`{"a":1}`:                   "",
		` [1, "x", null, true] `:    "",
		`"just a string"`:           "",
		`{"a":{"a":{"a":1}},"b":2}`: "",
		`{"a":1,"a":1}`:             RuleDuplicateKey,
		`{"a":1,"\u0061":2}`:        RuleDuplicateKey,
		`[{"k":1},{"k":1,"k":2}]`:   RuleDuplicateKey,
		`{"a":1}{"b":2}`:            RuleInvalidJSON,
		`{"a":1} trailing`:          RuleInvalidJSON,
		``:                          RuleInvalidJSON,
		`{"a":`:                     RuleInvalidJSON,
		"{\"a\":\"\xff\"}":          RuleInvalidJSON,
		strings.Repeat("[", 600) + strings.Repeat("]", 600): RuleInvalidJSON,
		strings.Repeat("[", 500) + strings.Repeat("]", 500): "",
	}
	for in, want := range cases {
		got := ""
		if v := CheckJSON(strings.NewReader(in)); v != nil {
			got = v.Rule
		}
		if got != want {
			t.Errorf("CheckJSON(%.40q) = %q, want %q", in, got, want)
		}
	}
}

// TestUTF8ReaderSplitsSequences feeds multi-byte runes one byte at a time.
func TestUTF8ReaderSplitsSequences(t *testing.T) {
	in := `{"k":"héllo wörld ✓ 𝄞"}`
	if v := CheckJSON(iotest.OneByteReader(strings.NewReader(in))); v != nil {
		t.Fatalf("valid UTF-8 split across reads rejected: %+v", v)
	}
	got, err := io.ReadAll(&utf8Reader{r: iotest.HalfReader(strings.NewReader(in))})
	if err != nil || string(got) != in {
		t.Fatalf("utf8Reader altered input: %q %v", got, err)
	}
	if _, err := io.ReadAll(&utf8Reader{r: strings.NewReader("ok\xe2\x9c")}); err == nil {
		t.Fatal("truncated rune at EOF accepted")
	}
}

func TestCheckEnv(t *testing.T) {
	cases := []struct {
		in   string
		keys int64
		rule string
	}{
		{"A=1\nB=\n_c=x=y", 3, ""},
		{"A=1\n", 1, ""},
		{"", 0, ""},
		{` {"A":"1","B_2":""} `, 2, ""},
		{"A=1\n\nB=2\n", 0, RuleInvalidEnv},
		{" A=1\n", 0, RuleBadEnvKey},
		{"A=1\r\n", 0, RuleInvalidEnv},
		{"NOEQUALS\n", 0, RuleInvalidEnv},
		{"A-B=1\n", 0, RuleBadEnvKey},
		{"A=1\nA=2\n", 0, RuleDuplicateKey},
		{`{"A":"1","A":"2"}`, 0, RuleDuplicateKey},
		{`{"A":1}`, 0, RuleInvalidEnv},
		{`{"A":{"B":"c"}}`, 0, RuleInvalidEnv},
		{`{"1A":"x"}`, 0, RuleBadEnvKey},
		{"A=\xff\n", 0, RuleInvalidEnv},
		{"A=1\nB=2\nC=3\n", 0, RuleOverMaxEntries},
	}
	for _, c := range cases {
		n, v := CheckEnv(strings.NewReader(c.in), 2+boolInt(c.keys == 3))
		got := ""
		if v != nil {
			got = v.Rule
		}
		if got != c.rule || (got == "" && n != c.keys) {
			t.Errorf("CheckEnv(%q) = %d, %q; want %d, %q", c.in, n, got, c.keys, c.rule)
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// FuzzCheckJSON: the checker never panics, and whatever it accepts the
// standard library parses too.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,{"b":[2]}]`, `{"a":1,"a":2}`, `"x"`, `{"a":"\ud800"}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckJSON(bytes.NewReader(b)) == nil && !json.Valid(b) {
			t.Fatalf("CheckJSON accepted invalid JSON %q", b)
		}
	})
}

func FuzzCheckEnv(f *testing.F) {
	for _, s := range []string{"A=1\n", `{"A":"b"}`, "A=1\nA=2", "=", " {"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, v := CheckEnv(bytes.NewReader(b), 1000)
		if v == nil && n < 0 {
			t.Fatalf("negative key count for %q", b)
		}
	})
}
