package cli

import (
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/spec"
)

// renderManifest writes the summary manifest show prints by default. It
// keeps enforcement (guaranteed by a control) apart from observation (seen,
// never guaranteed complete unless the manifest says so), and always ends
// with the two claims the runtime never makes.
func renderManifest(w io.Writer, op *operation) error {
	m := op.m
	tw := table(w)
	row(tw, "operation", m.OperationID)
	row(tw, "record", op.dir)
	if op.who != "" {
		row(tw, "container", op.who)
	}
	admissionRows(tw, m)
	row(tw, "subject", subjectLine(m.Subject))
	row(tw, "exit status", strconv.FormatUint(uint64(m.ExitStatus), 10))
	row(tw, "drained", fmt.Sprintf("%d process(es) left in the cgroup were killed after init exited", m.Drained))
	row(tw, "deadlines", deadlinesLine(m.Deadlines))
	tw.Flush()

	n := m.Enforcement.Network
	fmt.Fprintf(w, "\nenforced (a control guaranteed it):\n")
	tw = table(w)
	row(tw, "  network", fmt.Sprintf("%s, mode %s, loopback %s", orText(n.Mechanism, "none recorded"), orText(n.Mode, "not recorded"), orText(n.Loopback, spec.LoopbackDeny)))
	row(tw, "  scope", orText(n.Scope, "not recorded"))
	row(tw, "  table", orText(n.Table, "not recorded")+tableRemoved(n))
	if len(n.Allow) == 0 {
		row(tw, "  allow", "nothing (every destination outside the loopback policy is denied)")
	}
	for i, a := range n.Allow {
		label := ""
		if i == 0 {
			label = "  allow"
		}
		row(tw, label, allowLine(a))
	}
	if len(n.Serve) > 0 {
		row(tw, "  serve", serveLine(n.Serve))
	}
	caps := "none recorded"
	if len(m.Enforcement.CapabilitiesRemoved) > 0 {
		caps = strings.Join(m.Enforcement.CapabilitiesRemoved, ", ")
	}
	if n := m.Enforcement.CapabilitiesRemovedExecs; n > 0 {
		caps += fmt.Sprintf(" (also from %d exec(s))", n)
	}
	row(tw, "  capabilities removed", caps)
	row(tw, "  network status", networkStatusLine(n))
	if m.Host != nil && m.Host.Sandbox != nil {
		sandboxRows(tw, m.Host.Sandbox)
	}
	tw.Flush()
	if len(m.Enforcement.NotEnforced) > 0 {
		fmt.Fprintf(w, "\nnot enforced (no control held it):\n")
		for _, ne := range m.Enforcement.NotEnforced {
			fmt.Fprintf(w, "  - %s\n", safeText(ne))
		}
	}

	renderFindings(w, m)

	renderObserved(w, m)

	g := m.Gate
	fmt.Fprintf(w, "\ngate: %s (%d violation(s))\n", g.Verdict, len(g.Violations))
	tw = table(w)
	for _, v := range g.Violations {
		row(tw, "  violation", safeText(orText(v.Slot, "-")), safeText(orText(v.Path, "-")), safeText(v.Rule), safeText(v.Detail))
	}
	tw.Flush()
	renderProducts(w, m)
	fmt.Fprintf(w, "\nunclaimed: %d change(s) outside every product%s\n", m.Unclaimed.Count, digestSuffix(m.Unclaimed.Digest))
	fmt.Fprintf(w, "excluded: %d entr(ies) under excluded names, mount stubs or left as they were before the start, never staged\n", m.Excluded.Count)
	fmt.Fprintf(w, "semantically verified: %s (the gate checks structure, never meaning)\n", yesNo(m.SemanticallyVerified))
	fmt.Fprintf(w, "promoted: %s (products stay under %s/staged)\n", yesNo(m.Promoted), op.dir)
	return nil
}

// renderObserved writes what was seen: counters, served replies and the
// denied attempts.
func renderObserved(w io.Writer, m *spec.Manifest) {
	n := m.Enforcement.Network
	o := m.Observation
	fmt.Fprintf(w, "\nobserved (seen, not guaranteed):\n")
	tw := table(w)
	c := o.Counters
	if c.Error != "" {
		row(tw, "  counters", "not read ("+safeText(c.Error)+"): the zeros recorded mean nothing")
	} else {
		row(tw, "  counters", fmt.Sprintf("allowed %d packets / %d bytes; denied %d packets / %d bytes", c.AllowedPackets, c.AllowedBytes, c.DeniedPackets, c.DeniedBytes))
	}
	for i, l := range servedLines(n, o) {
		label := ""
		if i == 0 {
			label = "  served"
		}
		row(tw, label, l)
	}
	row(tw, "  denied attempts", deniedLine(o.DeniedAttempts))
	for _, d := range o.DeniedAttempts.Items {
		at := ""
		if !d.At.IsZero() {
			at = "  at " + d.At.UTC().Format(time.RFC3339)
		}
		row(tw, "", safeText(d.Proto+" "+d.Target)+at)
	}
	tw.Flush()
}

// networkStatusLine says whether the table held for the whole run, and
// what the sensors saw when it may not have.
func networkStatusLine(n spec.NetworkEnforcement) string {
	switch n.Status {
	case "":
		return "not recorded"
	case spec.NetworkEnforced:
		return "enforced: no drift of the table, no denied target reached, no process seen outside its scope"
	case spec.NetworkDefeatDetected:
		return "defeat_detected: a target the table denied was later reached (see findings)"
	}
	return safeText(n.Status) + " (see findings and observation: escapes, table_drift)"
}

// renderFindings lists the control_defeat findings the watchdog raised
// while the subject ran, cleared or not.
func renderFindings(w io.Writer, m *spec.Manifest) {
	if len(m.Findings) == 0 && m.FindingsError == "" {
		fmt.Fprintf(w, "\nfindings: none (no control_defeat signature fired)\n")
		return
	}
	fmt.Fprintf(w, "\nfindings (evidence that a boundary failed):\n")
	tw := table(w)
	for _, f := range m.Findings {
		state := "open"
		if c := f.Cleared; c != nil {
			state = "cleared " + c.At.UTC().Format(time.RFC3339) + " by " + c.By
		}
		row(tw, "  "+safeText(f.Signature), f.At.UTC().Format(time.RFC3339), fmt.Sprintf("%d evidence", len(f.Evidence)), safeText(state), safeText(f.Detail))
	}
	if m.FindingsError != "" {
		row(tw, "  not read", safeText(m.FindingsError)+": the list may be short")
	}
	tw.Flush()
}

// sandboxRows lists a host run's layers (manifest host.sandbox).
func sandboxRows(tw *tabwriter.Writer, sb *spec.HostSandbox) {
	row(tw, "  namespaces", safeText(strings.Join(sb.Namespaces, "; ")))
	row(tw, "  session", safeText(sb.Session))
	for i, l := range sb.Stdio {
		row(tw, map[bool]string{true: "  stdio"}[i == 0], safeText(l))
	}
	row(tw, "  executable", safeText(sb.Executable))
	if l := sb.Landlock; l != nil {
		row(tw, "  landlock", fmt.Sprintf("ABI %d; fs %s; scoped %s", l.ABI, orText(safeText(strings.Join(l.FS, ", ")), "none"), orText(safeText(strings.Join(l.Scoped, ", ")), "none")))
		if len(l.Missing) > 0 {
			row(tw, "", "not at this ABI: "+safeText(strings.Join(l.Missing, "; ")))
		}
	} else {
		row(tw, "  landlock", "none (the kernel has no Landlock)")
	}
	for i, l := range sb.Seccomp {
		row(tw, map[bool]string{true: "  seccomp refuses"}[i == 0], safeText(l))
	}
	for i, l := range sb.Masked {
		row(tw, map[bool]string{true: "  masked"}[i == 0], safeText(l))
	}
}

func renderProducts(w io.Writer, m *spec.Manifest) {
	if len(m.Products) == 0 {
		fmt.Fprintf(w, "\nproducts: none declared\n")
		return
	}
	fmt.Fprintf(w, "\nproducts:\n")
	tw := table(w)
	row(tw, "  CLASS", "SLOT", "VERDICT", "BYTES", "DIGEST", "STAGED")
	for _, p := range m.Products {
		digest := p.TreeDigest
		if digest == "" && p.SHA256 != "" {
			digest = "sha256:" + p.SHA256
		}
		row(tw, "  "+safeText(p.Class), safeText(p.Slot), safeText(p.Verdict), strconv.FormatInt(p.Bytes, 10), safeText(orText(digest, "-")), safeText(orText(p.Staged, "not staged")))
	}
	tw.Flush()
}

func tableRemoved(n spec.NetworkEnforcement) string {
	switch {
	case n.Table == "":
		return ""
	case n.TableRemoved == spec.TableDeleted:
		return ", deleted at exit"
	case n.TableRemoved == spec.TableWithNetns:
		return ", gone with the container's private network namespace"
	case n.TableRemoved != "":
		return ", removed: " + safeText(n.TableRemoved)
	}
	return ", not recorded as removed"
}

// admissionRows are the summary's rows on admission: the contract, the
// catalog, how the contract was chosen, the env left out of the digest.
func admissionRows(tw *tabwriter.Writer, m *spec.Manifest) {
	row(tw, "contract", orText(m.Contract.ID, "not recorded")+"  "+m.Contract.Digest)
	row(tw, "catalog", "version "+strconv.FormatUint(m.CatalogVersion, 10))
	row(tw, "chosen by", chosenBy(m.Inference))
	if len(m.VolatileEnv) > 0 {
		row(tw, "volatile env", volatileLine(m.VolatileEnv))
	}
}

func chosenBy(in spec.InferenceSummary) string {
	var b strings.Builder
	if in.SafeDefault {
		b.WriteString("safe_default: yes, because the inference did not decide (" + safeText(orText(in.Reason, "reason not recorded")) + ")")
	} else {
		b.WriteString("safe_default: no")
	}
	if in.Analyzer != "" || in.Class != "" {
		fmt.Fprintf(&b, "; inference %s by %s (model %s), confidence %s",
			orText(in.Class, "-"), orText(in.Analyzer, "-"), orText(in.Model, "-"), bpPercent(in.ConfidenceBP))
	} else {
		b.WriteString("; no inference recorded")
	}
	switch in.Source {
	case spec.InferenceFromAnalyzer:
		b.WriteString("; asked the node analyzer")
		if in.AnalyzerOutcome != "" {
			b.WriteString(", which gave no accepted inference (" + safeText(in.AnalyzerOutcome) + ")")
		}
	case spec.InferenceFromAnnotation:
		b.WriteString("; from the caller's annotation")
	}
	return b.String()
}

// volatileLine names the environment variables left out of the command
// digest.
func volatileLine(names []string) string {
	return safeText(strings.Join(names, ", ")) + " (values left out of command_digest by the selector's volatile_env)"
}

func subjectLine(s spec.Subject) string {
	if s.InitPID == 0 && s.CgroupPath == "" {
		return "not recorded (the task never started)"
	}
	return fmt.Sprintf("init pid %d (start time %d ticks), cgroup %s (id %d)", s.InitPID, s.StartTime, orText(s.CgroupPath, "-"), s.CgroupID)
}

func deadlinesLine(d spec.Deadlines) string {
	var parts []string
	if d.Task != "" {
		p := "task " + d.Task
		if !d.TaskExpiresAt.IsZero() {
			p += " (until " + d.TaskExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
		parts = append(parts, p)
	} else {
		parts = append(parts, "no task deadline")
	}
	if !d.InferenceExpiresAt.IsZero() {
		parts = append(parts, "inference expires "+d.InferenceExpiresAt.UTC().Format(time.RFC3339))
	}
	if !d.CatalogExpiresAt.IsZero() {
		parts = append(parts, "catalog expires "+d.CatalogExpiresAt.UTC().Format(time.RFC3339))
	}
	parts = append(parts, "exceeded: "+yesNo(d.Exceeded))
	return strings.Join(parts, "; ")
}

// deniedLine never lets an empty list read as "nothing was tried".
func deniedLine(d spec.DeniedAttempts) string {
	switch {
	case len(d.Items) == 0 && !d.Complete:
		return "not collected: the list is empty and incomplete, which says nothing about whether attempts occurred (see the denied counters)"
	case len(d.Items) == 0:
		return "none seen, and the log is complete"
	case d.Complete:
		return fmt.Sprintf("%d seen; the list is complete", len(d.Items))
	}
	return fmt.Sprintf("%d seen; the list is incomplete (records were dropped or not collected), more may have occurred", len(d.Items))
}

func allowLine(a spec.AllowRule) string {
	if a.Port == 0 {
		return a.Proto + " " + a.IP
	}
	if ip, err := netip.ParseAddr(a.IP); err == nil {
		return a.Proto + " " + netip.AddrPortFrom(ip, uint16(a.Port)).String()
	}
	return fmt.Sprintf("%s %s port %d", a.Proto, a.IP, a.Port)
}

func bpPercent(bp int) string {
	return fmt.Sprintf("%d.%02d%%", bp/100, bp%100)
}

func digestSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " (" + d + ")"
}

func orText(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// safeText quotes a recorded string that holds anything but printable
// UTF-8: violation paths and details name container files, and a name with
// a newline or an escape sequence must neither break a row nor drive the
// terminal.
func safeText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}
