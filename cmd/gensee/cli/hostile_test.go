package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileInputs feeds malformed documents to every command that reads
// one: each must refuse (1) or fail as I/O (2) with a "gensee: " message,
// never succeed or panic.
func TestHostileInputs(t *testing.T) {
	ckp := keys(t)
	akp := analyzerKeys(t)
	inputs := map[string]string{
		"empty":           "",
		"null":            "null",
		"array":           "[]",
		"truncated":       `{"id":`,
		"garbage":         "\x00\xff\xfe binary",
		"deep":            strings.Repeat("[", 10000),
		"huge":            "{" + strings.Repeat(" ", 2<<20) + "}",
		"duplicate keys":  `{"id":"a","id":"b","version":1,"network":{"mode":"deny_all"}}`,
		"case folded":     `{"ID":"a","version":1,"network":{"mode":"deny_all"}}`,
		"number overflow": `{"schema":"gensee.catalog/v1","version":99999999999999999999999}`,
		"envelope no sig": `{"payloadType":"application/vnd.gensee.catalog.v1+json","payload":"e30=","signatures":[]}`,
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	for name, text := range inputs {
		p := writeFile(t, dir, strings.ReplaceAll(name, " ", "_")+".json", text)
		commands := [][]string{
			{"boundary", "validate", "--contract", p},
			{"boundary", "audit", "--contract", p},
			{"boundary", "audit", "--contract", p, "--json"},
			{"catalog", "sign", "--key", ckp.private, "--in", p, "--out", out},
			{"catalog", "inspect", "--catalog", p, "--trusted-key", ckp.public},
			{"catalog", "inspect", "--catalog", p, "--trusted-key", p},
			{"catalog", "sign", "--key", p, "--in", contrib(t, "catalog.json"), "--out", out},
			{"inference", "sign", "--key", akp.private, "--in", p, "--out", out},
			{"inference", "make", "--observation", p, "--class", "build", "--confidence", "9000", "--key", akp.private, "--out", out},
			{"observe", "--rootfs", dir, "--config", p},
		}
		for _, args := range commands {
			t.Run(name+"/"+strings.Join(args[:2], " "), func(t *testing.T) {
				r := std().run(t, args...)
				if r.code != ExitRefused && r.code != ExitUsage {
					t.Fatalf("exit %d, want 1 or 2\nstdout: %.300s\nstderr: %.300s", r.code, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "gensee: ") {
					t.Errorf("no message: %q", r.stderr)
				}
			})
		}
	}
}
