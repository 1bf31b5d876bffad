package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gensee/gensee/shim/config"
)

const rootIntro = `gensee is the operator CLI of the gensee containerd runtime
(io.containerd.gensee.v2): check contracts, sign catalogs and inferences,
preflight observations, see what this host can enforce, read and verify
the effect manifests of operations, and read their boundary events and
control-defeat attention.`

// exitCodesHelp is part of the interface: scripts branch on these codes.
const exitCodesHelp = `Exit codes:
  0  ok
  1  refused or invalid: a document breaks a rule, a signature, expiry
     or trust check refused it, staged products do not match their
     manifest, or attention clear found no attention set
  2  usage error, or a file could not be read or written
  3  boundary audit: some granted control is only observed (or could not
     be verified) on this host
  4  boundary audit --operation: a control was defeated (a control_defeat
     signature fired)`

func writeGroupHelp(w io.Writer, c *Command, path []string) {
	if len(path) == 0 {
		fmt.Fprintf(w, "%s\n\nUsage:\n  gensee <command> [<subcommand>] [flags]\n\nCommands:\n", rootIntro)
	} else {
		fmt.Fprintf(w, "Usage:\n  gensee %s <subcommand> [flags]\n\n%s.\n\nSubcommands:\n", strings.Join(path, " "), capitalize(c.Summary))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, line := range leaves(c, nil) {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(line.path, " "), line.cmd.Summary)
	}
	tw.Flush()
	if len(path) == 0 {
		fmt.Fprintf(w, "\nRun 'gensee <command> [<subcommand>] --help' for its flags.\n")
		fmt.Fprintf(w, "\nCommands that read records find the operator config by --config F, else\n$%s, else %s.\n", config.EnvConfig, config.DefaultPath)
		fmt.Fprintf(w, "Errors go to stderr as \"gensee: <what failed>: <why>; <fix>\".\n")
	} else {
		fmt.Fprintf(w, "\nRun 'gensee %s <subcommand> --help' for its flags.\n", strings.Join(path, " "))
	}
	fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
}

type leafLine struct {
	path []string
	cmd  *Command
}

// leaves lists every leaf below c with its path relative to c.
func leaves(c *Command, path []string) []leafLine {
	var out []leafLine
	for _, s := range c.Subs {
		p := append(append([]string{}, path...), s.Name)
		if s.Setup != nil {
			out = append(out, leafLine{p, s})
			continue
		}
		out = append(out, leaves(s, p)...)
	}
	return out
}

func writeLeafHelp(w io.Writer, c *Command, path []string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage:\n  gensee %s %s\n\n%s.\n", strings.Join(path, " "), c.Args, capitalize(c.Summary))
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			name := "--" + f.Name
			if arg != "" {
				name += " " + arg
			}
			if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
