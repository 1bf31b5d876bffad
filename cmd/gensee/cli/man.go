package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteManPages renders the command tree as roff man pages in dir:
// gensee(1) and one gensee-<command>-<subcommand>(1) per leaf, from the
// same Command structs the --help pages and docs/cli.md are written from.
// hack/genman calls it for make install and make release; date and
// version go into each page's .TH line. It returns the files it wrote.
func WriteManPages(dir, date, version string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := root()
	var written []string
	put := func(name string, b []byte) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	var b bytes.Buffer
	writeRootMan(&b, r, date, version)
	if err := put("gensee.1", b.Bytes()); err != nil {
		return nil, err
	}
	for _, l := range leaves(r, nil) {
		b.Reset()
		writeLeafMan(&b, l.cmd, l.path, date, version)
		if err := put(manName(l.path)+".1", b.Bytes()); err != nil {
			return nil, err
		}
	}
	return written, nil
}

func manName(path []string) string { return "gensee-" + strings.Join(path, "-") }

func manTH(w io.Writer, name, date, version string) {
	fmt.Fprintf(w, ".\\\" Generated from the command tree (cmd/gensee/cli, hack/genman); do not edit.\n")
	fmt.Fprintf(w, ".TH %s 1 %q %q \"gensee manual\"\n", strings.ToUpper(roffEsc(name)), date, "gensee "+version)
}

func writeRootMan(w io.Writer, r *Command, date, version string) {
	manTH(w, "gensee", date, version)
	fmt.Fprintf(w, ".SH NAME\ngensee \\- the operator CLI of the gensee containerd runtime\n")
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B gensee\n[global flags] <command> [<subcommand>] [flags] [ID]\n")
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n", roffText(strings.Join(strings.Fields(rootIntro), " ")))
	fmt.Fprintf(w, ".PP\nRun \\fBgensee\\fR <command> [<subcommand>] \\fB\\-\\-help\\fR for a command's flags.\n")
	fmt.Fprintf(w, ".SH COMMANDS\n")
	for _, l := range leaves(r, nil) {
		fmt.Fprintf(w, ".TP\n.B gensee %s\n%s. See \\fB%s\\fR(1).\n", roffEsc(strings.Join(l.path, " ")), roffText(capitalize(l.cmd.Summary)), roffEsc(manName(l.path)))
	}
	fmt.Fprintf(w, ".SH GLOBAL FLAGS\nGiven before the command; all but \\fB\\-\\-config\\fR and \\fB\\-\\-version\\fR also after it.\n")
	for _, gf := range globalFlags {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roffEsc(gf.spelling()), roffText(gf.text()))
	}
	writeManTail(w)
	fmt.Fprintf(w, ".SH SEE ALSO\n")
	var refs []string
	for _, l := range leaves(r, nil) {
		refs = append(refs, "\\fB"+roffEsc(manName(l.path))+"\\fR(1)")
	}
	fmt.Fprintf(w, "%s\n", strings.Join(refs, ",\n"))
}

func writeLeafMan(w io.Writer, c *Command, path []string, date, version string) {
	name := manName(path)
	manTH(w, name, date, version)
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", roffEsc(name), roffText(c.Summary))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.nf\n\\fBgensee %s\\fR %s\n.fi\n", roffEsc(strings.Join(path, " ")), roffText(strings.TrimSpace(c.Args)))
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s.\n", roffText(capitalize(c.Summary)))
	if c.Long != "" {
		fmt.Fprintf(w, ".PP\n.nf\n%s\n.fi\n", roffText(strings.TrimSpace(c.Long)))
	}
	fs, _ := leafFlags(c, path, nil)
	var flags []*flag.Flag
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if isGlobal(f) {
			return
		}
		if len(f.Name) == 1 {
			short[f.Usage] = f.Name
			return
		}
		flags = append(flags, f)
	})
	if len(flags) > 0 {
		fmt.Fprintf(w, ".SH OPTIONS\n")
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			n := "--" + f.Name
			if s, ok := short[f.Usage]; ok {
				n = "-" + s + ", " + n
			}
			if arg != "" {
				n += " " + arg
			}
			if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roffEsc(n), roffText(usage))
		}
	}
	writeManTail(w)
	fmt.Fprintf(w, ".SH SEE ALSO\n\\fBgensee\\fR(1)\n")
}

func writeManTail(w io.Writer) {
	fmt.Fprintf(w, ".SH EXIT STATUS\n.nf\n%s\n.fi\n", roffText(strings.TrimPrefix(exitCodesHelp, "Exit codes:\n")))
}

// roffEsc escapes backslashes and hyphens for a roff argument or line.
func roffEsc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffText escapes s as running text: a line that would start with a
// control character ('.' or '\”) is protected with \&.
func roffText(s string) string {
	lines := strings.Split(roffEsc(s), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
