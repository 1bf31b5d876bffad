package events

import (
	"strings"
	"testing"
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
