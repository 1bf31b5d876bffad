package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestShimLinksNoRequestTracing: the long-lived shim, built with the
// Makefile's tags, links neither gRPC's request tracing nor the templates
// it pulls in. Their reflection (MethodByName) makes the linker keep every
// exported method of every reachable type, about 4 MiB of text, rodata and
// pclntab, and every sleeping task's shim maps it (P5).
func TestShimLinksNoRequestTracing(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TAGS \?= (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no TAGS ?= line")
	}
	tags := strings.Join(strings.Fields(string(m[1])), ",")
	out, err := exec.Command("go", "list", "-tags", tags, "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "golang.org/x/net/trace", "html/template":
			t.Errorf("gensee-shim built with tags %q depends on %s", tags, p)
		}
	}
	// The measuring aid is opt-in: the default build does not compile it.
	out, err = exec.Command("go", "list", "-tags", tags, "-f", `{{join .GoFiles "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if f == "profile.go" {
			t.Errorf("gensee-shim built with tags %q compiles profile.go", tags)
		}
	}
}
