package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds gensee and checks the wiring end to end: exit codes
// reach the process and messages land on the right stream. The commands
// themselves are tested in-process in cmd/gensee/cli.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gensee")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"id":"c","version":1,"network":{"mode":"allow_exact","allow":[{"ip":"example.com","proto":"tcp","port":443}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"--help"}, 0, "Exit codes:", ""},
		{[]string{"version"}, 0, "gensee ", ""},
		{[]string{"--version"}, 0, "gensee ", ""},
		{[]string{"completion", "bash"}, 0, "gensee __complete", ""},
		{[]string{"ls", "--nope"}, 2, "", "gensee: ls: flag provided but not defined"},
		{[]string{"boundary", "validate", "--contract", "../../contrib/boundary/offline-structured-result.json"}, 0, "valid: offline-structured-result", ""},
		{[]string{"boundary", "validate", "--contract", bad}, 1, "network.allow[0].ip: ", "gensee: boundary validate: "},
		{[]string{"boundary", "validate", "--contract", "/nonexistent"}, 2, "", "gensee: boundary validate: read contract"},
		{[]string{"nope"}, 2, "", `gensee: unknown command "nope"`},
		{nil, 2, "", "missing command"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errb.String())
			}
		})
	}
}
