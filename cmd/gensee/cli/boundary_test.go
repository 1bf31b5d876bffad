package cli

import (
	"testing"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name   string
		file   string // contract text, or "@name" for a contrib file
		code   int
		stdout []string
	}{
		{"design example", "@offline-structured-result.json", ExitOK, []string{"valid: offline-structured-result\n"}},
		{"allow exact example", "@allow-exact.json", ExitOK, []string{"valid: allow-exact\n"}},
		{"hostname", `{"id":"c","version":1,"network":{"mode":"allow_exact","allow":[{"ip":"example.com","proto":"tcp","port":443}]}}`,
			ExitRefused, []string{`network.allow[0].ip: "example.com" is a hostname; allow_exact takes IP addresses only` + "\n"}},
		{"every problem on its own line", `{"id":"c","version":0,"network":{"mode":"allow_exact","allow":[{"ip":"10.0.0.0/8","proto":"tcp"}]},"products":[{"class":"blob","slot":"../x"}]}`,
			ExitRefused, []string{"version: ", "network.allow[0].ip: ", "network.allow[0].port: ", "products[0].slot: "}},
		{"unknown field", `{"id":"c","version":1,"network":{"mode":"deny_all"},"extra":true}`, ExitRefused, []string{"extra: "}},
		{"not json", `not json`, ExitRefused, []string{": "}},
		{"empty", ``, ExitRefused, []string{"(document): "}},
		{"null", `null`, ExitRefused, nil},
		{"float version", `{"id":"c","version":1.5,"network":{"mode":"deny_all"}}`, ExitRefused, []string{"version: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, "c.json", tc.file)
			if tc.file != "" && tc.file[0] == '@' {
				p = contrib(t, tc.file[1:])
			}
			r := std().run(t, "boundary", "validate", "--contract", p)
			r.want(t, tc.code, tc.stdout, nil)
			if tc.code == ExitRefused {
				r.want(t, tc.code, nil, []string{"gensee: boundary validate: contract " + p + " is invalid"})
			}
		})
	}
}

func TestValidateStdinAndIOErrors(t *testing.T) {
	h := std()
	h.stdin = `{"id":"from-stdin","version":1,"network":{"mode":"deny_all"}}`
	h.run(t, "boundary", "validate", "--contract", "-").want(t, ExitOK, []string{"valid: from-stdin"}, nil)

	std().run(t, "boundary", "validate", "--contract", "/nonexistent/c.json").
		want(t, ExitUsage, nil, []string{"read contract /nonexistent/c.json: no such file or directory"})
	std().run(t, "boundary", "validate", "--contract", t.TempDir()).
		want(t, ExitUsage, nil, []string{"is not a regular file"})
}
