package events

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/spec"
)

const pemKey = `-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEA7bq0vXh0mK3pL5rQ9sT2uV8wY1zA4bC6dE0fG2hI3jK5lM7n
O9pQ1rS3tU5vW7xY9zA1bC3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5zA7bC9dE
-----END RSA PRIVATE KEY-----`

func TestRedact(t *testing.T) {
	for _, c := range []struct {
		name, in string
		gone     []string // must not survive
		keep     []string // must survive
	}{
		{"bearer", "GET /v1 failed: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig123 rest", []string{"eyJhbGci", "sig123"}, []string{"GET /v1 failed", "Authorization: [REDACTED]"}},
		{"bare bearer", "token was xBearer abcDEF123456 then", []string{"abcDEF123456"}, []string{"then"}},
		{"basic", "proxy said Basic dXNlcjpwYXNz ok", []string{"dXNlcjpwYXNz"}, []string{"proxy said", "ok"}},
		{"pem", "key: " + pemKey + " after", []string{"MIIEowIBAAKCAQEA", "O9pQ1rS3"}, []string{"after"}},
		{"pem cut", "leaked -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU", []string{"b3BlbnNzaC1r"}, []string{"leaked"}},
		{"aws id", "creds AKIAIOSFODNN7EXAMPLE used", []string{"AKIAIOSFODNN7EXAMPLE"}, []string{"creds", "used"}},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", []string{"wJalrXUtnFEMI"}, []string{"aws_secret_access_key"}},
		{"bare base64", "value wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY end", []string{"wJalrXUtnFEMI"}, []string{"value", "end"}},
		{"password", "connect to db password=hunter2&user=x", []string{"hunter2"}, []string{"password=[REDACTED]", "user=x"}},
		{"json secret", `{"client_secret": "s3cr3t value", "n": 1}`, []string{"s3cr3t"}, []string{`"n": 1`}},
		{"token colon", "GITHUB_TOKEN: ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", []string{"ghp_0123"}, nil},
		{"url userinfo", "clone https://bob:pa55word@git.example.com/r.git", []string{"pa55word"}, []string{"https://bob:[REDACTED]@git.example.com/r.git"}},
		{"long hex", "key 0123456789abcdef0123456789abcdef01 end", []string{"0123456789abcdef0123456789abcdef01"}, []string{"key", "end"}},
		{"digest kept", "staged product out/a no longer matches sha256:" + strings.Repeat("ab", 32), nil, []string{"sha256:" + strings.Repeat("ab", 32)}},
		{"path kept", "refused /usr/lib/x86_64-linux-gnu/libLLVM15abcdefghijk.so write", nil, []string{"/usr/lib/x86_64-linux-gnu/libLLVM15abcdefghijk.so"}},
		{"target kept", "connect to [2001:db8::2]:8080/tcp refused by deny_all", nil, []string{"[2001:db8::2]:8080/tcp refused by deny_all"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Redact(c.in)
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("Redact(%q) = %q keeps %q", c.in, got, g)
				}
			}
			for _, k := range c.keep {
				if !strings.Contains(got, k) {
					t.Errorf("Redact(%q) = %q lost %q", c.in, got, k)
				}
			}
			checkLine(t, got)
		})
	}
}

func TestRedactLongDetail(t *testing.T) {
	in := "Authorization: Bearer " + strings.Repeat("A1b", 200) + "\n" + pemKey + "\n" + strings.Repeat("x ", 400)
	got := Redact(in)
	checkLine(t, got)
	if strings.Contains(got, "A1bA1b") || strings.Contains(got, "MIIE") {
		t.Errorf("secret survived: %q", got)
	}
	if n := utf8.RuneCountInString(got); n != spec.MaxEventDetail {
		t.Errorf("len %d, want cut at %d", n, spec.MaxEventDetail)
	}
}

func checkLine(t *testing.T, s string) {
	t.Helper()
	if utf8.RuneCountInString(s) > spec.MaxEventDetail || !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\t\x00") {
		t.Errorf("not one valid line of <= %d runes: %q", spec.MaxEventDetail, s)
	}
}

// FuzzRedact: whatever surrounds a secret, it does not survive, and the
// result is one valid line of at most MaxEventDetail characters.
func FuzzRedact(f *testing.F) {
	f.Add("before ", " after")
	f.Add("token=", "")
	f.Add("-----BEGIN ", "-----END RSA PRIVATE KEY-----")
	f.Add("Authorization", "\n")
	f.Add("https://u:", "@h")
	f.Fuzz(func(t *testing.T, pre, post string) {
		for _, secret := range []string{
			"Bearer Zq9XwV7uT5sR3pN1",
			"password=Zq9XwV7uT5sR3pN1",
			"AKIAZQ9XWV7UT5SR3PN1",
			"-----BEGIN PRIVATE KEY-----\nZq9XwV7uT5sR3pN1\n-----END PRIVATE KEY-----",
		} {
			got := Redact(pre + secret + post)
			checkLine(t, got)
			if strings.Contains(got, "Zq9XwV7uT5sR3pN1") || strings.Contains(got, "ZQ9XWV7UT5SR3PN1") {
				t.Fatalf("Redact(%q) = %q", pre+secret+post, got)
			}
		}
	})
}

func TestSanitize(t *testing.T) {
	e := Sanitize(spec.Event{Kind: spec.EventEgressDenied, Control: "net\nwork", Target: "1.2.3.4:5/tcp\n", Detail: "a\tb token=zzz", Hint: "h\n2"})
	if e.Control != "net work" || e.Target != "1.2.3.4:5/tcp" || e.Detail != "a b token=[REDACTED]" || e.Hint != "h 2" {
		t.Fatalf("Sanitize = %+v", e)
	}
}

// needCorpus holds strings near every rule's edge: each literal a need
// looks for, in other cases, cut short, with the Kelvin sign and the long
// s, and runs one short of and at 32.
func needCorpus() []string {
	c := []string{"", "plain text", pemKey, "-----BEGIN", "-----begin RSA PRIVATE KEY-----x",
		"Authorization: x", "AUTHORIZATION=y", "authorizatio: z", "\u212Aey=v", "autho\u017Fization: z",
		"Bearer abc", "BASIC x", "bas ic x", "bearer", "ba\u017Fic x",
		"https://u:p@h", "https://u:p h@", "x@y://z", "s3://bucket/a@b", "a://",
		"password=x", "PASSWD: y", "pwd=1", "Token = t", "secret:", "api-key=1", "ACCESS_KEY: 2", "private-key=3", "credential=4", "session_key=5",
		"to\u212Aen=x", "pa\u017F\u017Fword=x", "password x", "key", "monkey: 1", "passage=1",
		"AKIAIOSFODNN7EXAMPLE", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "gh_0123456789abcdefghijklmnopqrstuvwxyz", "ghx_0123456789abcdefghijklmnopqrstuvwxyz", "github_pat_0123456789abcdefghijklmnopqrstuv",
		"xoxb-0123456789", "AIza0123456789abcdefghijklmnopqrstuvw", "sk-0123456789abcdefghijk", "glpat-0123456789abcdefghijk",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig123", "eyJ", "x.eyJabcde.fghij.",
		strings.Repeat("a", 31), strings.Repeat("A", 32), strings.Repeat("0f", 16), "sha256:" + strings.Repeat("ab", 32),
		strings.Repeat("Z9", 15) + "+", strings.Repeat("Z9", 16), "/" + strings.Repeat("a1B", 11), strings.Repeat("x", 31) + "=",
		"capability CAP_NET_RAW removed from the spec: AF_PACKET sockets would bypass the network table",
	}
	n := len(c)
	for i := range n {
		c = append(c, strings.ToUpper(c[i]), strings.ToLower(c[i]), "pre "+c[i]+" post")
	}
	return c
}

// TestRedactNeeds: a string without a rule's need is never matched by
// the rule's regexp, so skipping the regexp leaves every string as the
// regexp would, for the strings each rule sees in Redact.
func TestRedactNeeds(t *testing.T) {
	for _, s := range needCorpus() {
		checkNeeds(t, s)
	}
}

// checkNeeds runs every rule on s in Redact's order, each on what the
// rules before it left, and fails where a need refuses a string its rule
// matches: with it, Redact is every rule applied to every string.
func checkNeeds(t *testing.T, s string) {
	t.Helper()
	s = strings.ToValidUTF8(s, "\uFFFD")
	for i, r := range rules() {
		if r.need != nil && !r.need(s) && r.re().MatchString(s) {
			t.Errorf("rule %d (%s): its need refuses %q, which it matches", i, r.re(), s)
		}
		s = r.apply(s)
	}
}

// TestRedactRulesCompile: every rule's regexp compiles (they compile on
// first need, where a bad pattern would panic in a shim).
func TestRedactRulesCompile(t *testing.T) {
	for i, r := range rules() {
		if r.re() == nil || r.need == nil {
			t.Errorf("rule %d: no regexp or no need", i)
		}
	}
}

// FuzzRedactNeeds: the same for any string.
func FuzzRedactNeeds(f *testing.F) {
	for _, s := range needCorpus() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkNeeds(t, s) })
}

// TestHexFoldsASCII: (?i) folds no character outside ASCII into a hex
// letter, so the hex rule's need may look at bytes.
func TestHexFoldsASCII(t *testing.T) {
	for _, r := range "abcdefABCDEF" {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= utf8.RuneSelf {
				t.Errorf("%q folds to %q", r, f)
			}
		}
	}
}

// Unicode format characters (a right-to-left override, a zero-width
// space) never reach a sink: they would make a message read otherwise
// than it is.
func TestRedactFormatCharacters(t *testing.T) {
	got := Redact("exec /bin/\u202egnp.sh\u200b inside the rootfs")
	if strings.ContainsAny(got, "\u202e\u200b") {
		t.Fatalf("Redact kept a format character: %q", got)
	}
	if !strings.Contains(got, "\uFFFDgnp.sh\uFFFD") {
		t.Fatalf("Redact(%q) = %q; want each format character shown as U+FFFD", "...", got)
	}
}
