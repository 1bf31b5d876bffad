package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	for _, f := range []string{"--version", "-v"} {
		std().run(t, f).want(t, ExitOK, []string{"gensee "}, nil)
	}
}

func TestRootHelpGlobalFlags(t *testing.T) {
	std().run(t, "--help").want(t, ExitOK, []string{"Global flags:", "-a, --address SOCK", "-n, --namespace NS",
		"$CONTAINERD_ADDRESS", "$CONTAINERD_NAMESPACE", "--debug", "-v, --version", "ls", "refusals", "prune", "completion"}, nil)
	std().run(t, "ls", "--help").want(t, ExitOK, []string{"-q, --quiet", "--format json|table", "Global flags:", "-n, --namespace NS"}, nil)
	std().run(t, "prune", "--help").want(t, ExitOK, []string{"--dry-run", "max_age", "720h", "5000", "8GiB", "attention"}, nil)
	std().run(t, "refusals", "--help").want(t, ExitOK, []string{"--follow", "--reason R", "--container ID", "--format json|table"}, nil)
	std().run(t, "observe", "--help").want(t, ExitOK, []string{"--spec F", "deprecated: use --spec"}, nil)
}

// Ids are arguments as in ctr, with flags before or after; the flag forms
// still work, and -n works before the command or after it.
func TestPositionalIDs(t *testing.T) {
	fx := newOpFixture(t)
	for _, args := range [][]string{
		{"manifest", "show", fxContainer, "-n", fxNamespace},
		{"-n", fxNamespace, "manifest", "show", fxContainer},
		{"manifest", "show", "--namespace", fxNamespace, fxContainer},
		{"manifest", "show", "--container", fxContainer, "--namespace", fxNamespace},
		{"manifest", "show", fxOperation}, // an operation id, as gensee ls prints it
	} {
		fx.run(t, args...).want(t, ExitOK, []string{"ci-builds"}, nil)
	}
	h := std()
	h.env = map[string]string{EnvNamespace: fxNamespace}
	h.run(t, "manifest", "show", fxContainer, "--config", fx.config).want(t, ExitOK, []string{"ci-builds"}, nil)

	fx.run(t, "manifest", "show", fxContainer, "--json", "-n", fxNamespace).want(t, ExitOK, []string{`"operation_id"`}, nil)
	fx.run(t, "manifest", "show", fxContainer, "--format", "json", "-n", fxNamespace).want(t, ExitOK, []string{`"operation_id"`}, nil)
	fx.run(t, "manifest", "show", fxContainer, "--container", fxContainer).want(t, ExitUsage, nil, []string{"pass one"})
	fx.run(t, "manifest", "show", fxContainer, "extra").want(t, ExitUsage, nil, []string{`unexpected argument "extra"`})
	fx.run(t, "events", fxContainer, "-n", fxNamespace).want(t, ExitOK, nil, nil)
	fx.run(t, "boundary", "audit", fxContainer, "-n", fxNamespace).want(t, ExitOK, nil, nil)
	fx.run(t, "attention", "clear", fxOperation).want(t, ExitRefused, nil, []string{"no finding is open"})
}

func TestGlobalConfig(t *testing.T) {
	fx := newOpFixture(t)
	std().run(t, "--config", fx.config, "-n", fxNamespace, "manifest", "show", fxContainer).want(t, ExitOK, []string{"ci-builds"}, nil)
	std().run(t, "--config", fx.config, "--debug", "ls", "-q").want(t, ExitOK, []string{fxOperation}, []string{"gensee: debug: operator config " + fx.config})
}

func TestObserveSpecAndDeprecatedConfig(t *testing.T) {
	std().run(t, "observe", "--rootfs", "r").want(t, ExitUsage, nil, []string{"--rootfs and --spec go together"})
	std().run(t, "observe", "--bundle", "b", "--spec", "c").want(t, ExitUsage, nil, []string{"--bundle excludes --rootfs and --spec"})
	std().run(t, "observe", "--bundle", "b", "--config", "c").want(t, ExitUsage, nil, []string{"deprecated", "use --spec", "--bundle excludes"})
}

func TestUsageExitCodesUnchanged(t *testing.T) {
	std().run(t, "--nope").want(t, ExitUsage, nil, []string{"flag provided but not defined"})
	std().run(t, "ls", "--nope").want(t, ExitUsage, nil, []string{"gensee ls --help"})
	// boundary run keeps its own refusal status for usage errors.
	std().run(t, "boundary", "run", "--nope").want(t, ExitRunRefused, nil, nil)
}

func TestCompletion(t *testing.T) {
	cases := []struct {
		words []string
		want  []string
		not   []string
	}{
		{[]string{""}, []string{"manifest", "ls", "prune", "refusals", "boundary"}, []string{"show"}},
		{[]string{"ma"}, []string{"manifest"}, []string{"ls"}},
		{[]string{"-"}, []string{"--namespace", "-n", "--address", "--version"}, nil},
		{[]string{"-n", "k8s.io", "manifest", ""}, []string{"show", "verify"}, nil},
		{[]string{"manifest", "show", "--"}, []string{"--container", "--json", "--format", "--namespace", "--debug"}, []string{"--version"}},
		{[]string{"ls", "--format", ""}, []string{"json", "table"}, nil},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, nil},
		{[]string{"manifest", "show", "--config", ""}, nil, []string{"--json"}},
	}
	for _, tc := range cases {
		r := std().run(t, append([]string{completeArg}, tc.words...)...)
		got := strings.Fields(r.stdout)
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%q: no %q in %v", tc.words, w, got)
			}
		}
		for _, w := range tc.not {
			if contains(got, w) {
				t.Errorf("%q: %q in %v", tc.words, w, got)
			}
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		std().run(t, "completion", sh).want(t, ExitOK, []string{"gensee __complete"}, nil)
	}
	std().run(t, "completion", "tcsh").want(t, ExitUsage, nil, []string{"bash|zsh|fish"})
}

// The bash script completes through the binary's command tree.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil || testing.Short() {
		t.Skip("no bash, or -short (builds the binary)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gensee")
	build := exec.Command("go", "build", "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	script := std().run(t, "completion", "bash").stdout
	writeFile(t, dir, "c.bash", script)
	cmd := exec.Command(bash, "-c", `source `+dir+`/c.bash; COMP_WORDS=(gensee manifest s); COMP_CWORD=2; _gensee; echo "${COMPREPLY[@]}"`)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "show" {
		t.Fatalf("bash completion of 'gensee manifest s': %q, %v", out, err)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
