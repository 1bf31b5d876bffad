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
the effect manifests of operations, read their boundary events and
control-defeat attention, and promote verified products.`

// exitCodesHelp is part of the interface: scripts branch on these codes.
const exitCodesHelp = `Exit codes:
  0  ok
  1  refused or invalid: a document breaks a rule, a signature, expiry
     or trust check refused it, staged products do not match their
     manifest, a promotion check refused, a verifier judged a product
     fail, or attention clear found no attention set
  2  usage error, or a file could not be read or written
  3  boundary audit: some granted control is only observed (or could not
     be verified) on this host
  4  boundary audit --operation: a control was defeated (a control_defeat
     signature fired)`

func writeGroupHelp(w io.Writer, c *Command, path []string) {
	if len(path) == 0 {
		fmt.Fprintf(w, "%s\n\nUsage:\n  gensee [global flags] <command> [<subcommand>] [flags] [ID]\n\nCommands:\n", rootIntro)
	} else {
		fmt.Fprintf(w, "Usage:\n  gensee %s <subcommand> [flags]\n\n%s.\n\nSubcommands:\n", strings.Join(path, " "), capitalize(c.Summary))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, line := range leaves(c, nil) {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(line.path, " "), line.cmd.Summary)
	}
	tw.Flush()
	if len(path) == 0 {
		writeGlobalFlags(w, nil)
		fmt.Fprintf(w, "\nRun 'gensee <command> [<subcommand>] --help' for its flags.\n")
		fmt.Fprintf(w, "\nCommands that read records find the operator config by --config F, else\n$%s, else %s.\n", config.EnvConfig, config.DefaultPath)
		fmt.Fprintf(w, "Ids are arguments, as in ctr: gensee manifest show ID takes a container id\n(in namespace -n), or an operation id as gensee ls prints it.\n")
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
	fs.VisitAll(func(f *flag.Flag) {
		if !isGlobal(f) {
			flags = append(flags, f)
		}
	})
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
		short := map[string]string{} // usage -> a one-letter alias of the same flag
		for _, f := range flags {
			if len(f.Name) == 1 {
				short[f.Usage] = f.Name
			}
		}
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			name := "--" + f.Name
			if len(f.Name) == 1 {
				continue // listed with its long name
			}
			if s, ok := short[f.Usage]; ok {
				name = "-" + s + ", " + name
			}
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
	writeGlobalFlags(w, fs)
	fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
}

// writeGlobalFlags lists the global flags: all on the root page (leaf
// nil), on a leaf's page the ones it accepts after the command too and
// does not define itself.
func writeGlobalFlags(w io.Writer, leaf *flag.FlagSet) {
	fmt.Fprintf(w, "\nGlobal flags:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, gf := range globalFlags {
		if leaf != nil && (gf.root || !leafTakesGlobal(leaf, gf)) {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\n", gf.spelling(), gf.text())
	}
	tw.Flush()
}

// leafTakesGlobal reports whether one of gf's names is the global flag
// on leaf (not a flag of the leaf's own by that name).
func leafTakesGlobal(leaf *flag.FlagSet, gf globalFlag) bool {
	for _, n := range gf.names {
		if f := leaf.Lookup(n); f != nil && isGlobal(f) {
			return true
		}
	}
	return false
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
