package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
)

// writeMarkdown writes the command reference (docs/cli.md) from the
// command tree: the same synopsis, text and flags as each --help page.
// TestDocsCurrent keeps the file in step with the tree.
func writeMarkdown(w io.Writer, root *Command) {
	fmt.Fprintf(w, "# gensee command reference\n\n")
	fmt.Fprintf(w, "<!-- Generated from the command tree (cmd/gensee/cli); do not edit.\n")
	fmt.Fprintf(w, "     Regenerate: go test ./cmd/gensee/cli -run TestDocsCurrent -update-docs -->\n\n")
	fmt.Fprintf(w, "%s\n\n", strings.Join(strings.Fields(rootIntro), " "))
	fmt.Fprintf(w, "```\ngensee [global flags] <command> [<subcommand>] [flags] [ID]\n```\n\n")
	fmt.Fprintf(w, "## Global flags\n\nGiven before the command; all but `--config` and `--version` also after it.\n\n")
	fmt.Fprintf(w, "| Flag | Meaning |\n|---|---|\n")
	for _, gf := range globalFlags {
		fmt.Fprintf(w, "| `%s` | %s |\n", gf.spelling(), mdCell(gf.text()))
	}
	fmt.Fprintf(w, "\nCommands whose output has a `--json` flag also take `--format json|table`.\n")
	fmt.Fprintf(w, "Shell completion: `gensee completion bash|zsh|fish`.\n\n")
	fmt.Fprintf(w, "## Exit codes\n\n```\n%s\n```\n\n## Commands\n\n", exitCodesHelp)
	for _, l := range leaves(root, nil) {
		fmt.Fprintf(w, "- [`gensee %s`](#%s): %s\n", strings.Join(l.path, " "), anchor(l.path), l.cmd.Summary)
	}
	for _, l := range leaves(root, nil) {
		writeLeafMarkdown(w, l.cmd, l.path)
	}
}

func writeLeafMarkdown(w io.Writer, c *Command, path []string) {
	fs, _ := leafFlags(c, path, nil)
	fmt.Fprintf(w, "\n### gensee %s\n\n%s.\n\n", strings.Join(path, " "), capitalize(c.Summary))
	fmt.Fprintf(w, "```\ngensee %s %s\n```\n", strings.Join(path, " "), strings.ReplaceAll(c.Args, "\n  ", "\n"))
	if c.Long != "" {
		fmt.Fprintf(w, "\n```text\n%s\n```\n", strings.TrimSpace(c.Long))
	}
	var b bytes.Buffer
	writeFlagTable(&b, fs)
	if b.Len() > 0 {
		fmt.Fprintf(w, "\n| Flag | Meaning |\n|---|---|\n%s", b.String())
	}
}

// writeFlagTable writes a leaf's own flags as markdown table rows.
func writeFlagTable(w io.Writer, fs *flag.FlagSet) {
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 && !isGlobal(f) {
			short[f.Usage] = f.Name
		}
	})
	fs.VisitAll(func(f *flag.Flag) {
		if isGlobal(f) || len(f.Name) == 1 {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if s, ok := short[f.Usage]; ok {
			name = "-" + s + ", " + name
		}
		if arg != "" {
			name += " " + arg
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", name, mdCell(usage))
	})
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// anchor is the GitHub heading anchor of "gensee <path>".
func anchor(path []string) string {
	return "gensee-" + strings.Join(path, "-")
}
