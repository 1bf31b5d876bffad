package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gensee/gensee/spec"
)

// renderAudit writes the human-readable audit: grants, controls, probes,
// verdict.
func renderAudit(w io.Writer, rep AuditReport) {
	who := "not root: kernel probes skipped"
	if rep.Host.Root {
		who = "root"
	}
	fmt.Fprintf(w, "contract %s version %d (%s)\nhost     kernel %s, %s\n\nGRANTS\n", rep.Contract.ID, rep.Contract.Version, rep.Contract.Digest, rep.Host.Kernel, who)
	tw := table(w)
	g := rep.Grants
	row(tw, "  network", g.Network.Mode+", loopback "+g.Network.Loopback)
	for _, a := range g.Network.Allow {
		row(tw, "", "allow "+tupleText(a))
	}
	for _, p := range g.Network.Serve {
		row(tw, "", fmt.Sprintf("serve %s/%d (replies of inbound connections)", p.Proto, p.Port))
	}
	row(tw, "  workspace", g.Workspace)
	row(tw, "  deadline", orDash(g.Deadline))
	if len(g.Products) == 0 {
		row(tw, "  products", "-")
	}
	for i, p := range g.Products {
		label := ""
		if i == 0 {
			label = "  products"
		}
		row(tw, label, productText(p))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nCONTROLS\n")
	tw = table(w)
	for _, c := range rep.Controls {
		row(tw, "  "+c.Name, c.Status, c.Mechanism)
		if c.Granted {
			row(tw, "", "", c.Detail)
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nNOT ENFORCED\n")
	tw = table(w)
	for _, g := range rep.NotEnforced {
		row(tw, "  "+g.Name, g.Status+" in "+strings.Join(g.Netns, ", ")+" netns", g.Detail)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nHOST PROBES\n")
	tw = table(w)
	for _, p := range rep.Host.Probes {
		row(tw, "  "+p.Name, p.Result, p.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nverdict: %s (exit %d)\n", rep.Verdict, rep.ExitCode)
}

func tupleText(a spec.AllowRule) string {
	if a.Port == 0 {
		return a.IP + " " + a.Proto
	}
	return a.IP + " " + a.Proto + "/" + strconv.Itoa(a.Port)
}

func productText(p spec.Product) string {
	var lim []string
	add := func(name string, v int64) {
		if v != 0 {
			lim = append(lim, name+" "+strconv.FormatInt(v, 10))
		}
	}
	add("max_bytes", p.MaxBytes)
	add("max_entries", p.MaxEntries)
	add("max_depth", int64(p.MaxDepth))
	if len(p.Modes) > 0 {
		lim = append(lim, "modes "+strings.Join(p.Modes, ","))
	}
	if p.AllowSymlinks {
		lim = append(lim, "symlinks allowed")
	}
	s := p.Class + " " + p.Slot
	if len(lim) > 0 {
		s += " (" + strings.Join(lim, ", ") + ")"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
