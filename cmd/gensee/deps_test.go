package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesDeps: the CLI never links client-go or client_golang
// (cmd/gensee-node does): their package initialisation would slow every
// `gensee boundary run`.
func TestNoKubernetesDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"k8s.io/client-go", "k8s.io/api/", "github.com/prometheus/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("cmd/gensee depends on %s", p)
			}
		}
	}
}
