// Command conformance-report compares critest's JUnit reports of two
// runtime handlers on the same containerd:
//
//	conformance-report -expected hack/conformance-expected.txt -base runc=R.xml -test gensee=G.xml
//
// It prints each handler's passed/failed/skipped counts and every spec
// whose outcome differs, and exits 0 when every spec that passed under the
// base handler passed under the test handler too, except the intended
// refusals listed in the expected file; 1 otherwise; 2 on bad input.
package main

import (
	"bufio"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	expected := flag.String("expected", "", "file of intended refusals: `spec name substring | reason` per line")
	base := flag.String("base", "", "NAME=JUNIT.xml of the reference handler")
	test := flag.String("test", "", "NAME=JUNIT.xml of the handler under test")
	flag.Parse()
	bn, bf, ok1 := strings.Cut(*base, "=")
	tn, tf, ok2 := strings.Cut(*test, "=")
	if !ok1 || !ok2 || *expected == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: conformance-report -expected FILE -base NAME=FILE -test NAME=FILE")
		os.Exit(2)
	}
	refusals, err := readExpected(*expected)
	if err == nil {
		var b, t map[string]result
		if b, err = readJUnit(bf); err == nil {
			if t, err = readJUnit(tf); err == nil {
				os.Exit(report(os.Stdout, bn, b, tn, t, refusals))
			}
		}
	}
	fmt.Fprintln(os.Stderr, "conformance-report:", err)
	os.Exit(2)
}

// result is one spec's outcome in one run.
type result struct {
	status  string // passed, failed, skipped (pending and errors count as failed)
	message string // the failure, whitespace collapsed to single spaces
}

// refusal is one intended difference: specs whose name contains pattern
// may pass under the base handler and fail under the test handler.
type refusal struct{ pattern, reason string }

func readExpected(path string) ([]refusal, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []refusal
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, r, ok := strings.Cut(line, " | ")
		if !ok || strings.TrimSpace(p) == "" || strings.TrimSpace(r) == "" {
			return nil, fmt.Errorf("%s:%d: want `spec name substring | reason`", path, n)
		}
		out = append(out, refusal{strings.TrimSpace(p), strings.TrimSpace(r)})
	}
	return out, sc.Err()
}

type junit struct {
	Suites []struct {
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Status  string    `xml:"status,attr"`
			Failure *struct { // ginkgo writes <failure> or <error> for failed specs
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnit reads ginkgo's JUnit report: one testcase per spec, named
// "[It] <container texts> <spec text> [labels]"; suite nodes
// ([BeforeSuite], ...) are kept too, so their failures show.
func readJUnit(path string) (map[string]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j junit
	if err := xml.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	out := map[string]result{}
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			r := result{status: c.Status}
			switch {
			case c.Failure != nil:
				r.status, r.message = "failed", c.Failure.Message
			case c.Error != nil:
				r.status, r.message = "failed", c.Error.Message
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				r.status = "skipped"
			case c.Status == "passed":
			default:
				r.status = "failed"
			}
			r.message = strings.Join(strings.Fields(r.message), " ")
			if i := strings.Index(r.message, "admission refused: "); i >= 0 {
				r.message, _, _ = strings.Cut(r.message[i:], ": permission denied") // gensee's rule and fix-it sentence
			}
			out[c.Name] = r
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no test cases", path)
	}
	return out, nil
}

// counts counts the specs ("[It] ..." cases); suite nodes are not specs.
func counts(m map[string]result) (passed, failed, skipped, total int) {
	for n, r := range m {
		if !strings.HasPrefix(n, "[It]") {
			continue
		}
		total++
		switch r.status {
		case "passed":
			passed++
		case "skipped":
			skipped++
		default:
			failed++
		}
	}
	return
}

func report(w io.Writer, bn string, b map[string]result, tn string, t map[string]result, refusals []refusal) int {
	fmt.Fprintf(w, "%-8s %7s %7s %7s %7s\n", "handler", "passed", "failed", "skipped", "total")
	for _, h := range []struct {
		name string
		m    map[string]result
	}{{bn, b}, {tn, t}} {
		p, f, s, n := counts(h.m)
		fmt.Fprintf(w, "%-8s %7d %7d %7d %7d\n", h.name, p, f, s, n)
	}

	names := map[string]bool{}
	for n := range b {
		names[n] = true
	}
	for n := range t {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)

	used := map[string]bool{}
	unexpected, intended := 0, 0
	fmt.Fprintf(w, "\nspecs whose outcome differs (%s -> %s):\n", bn, tn)
	for _, n := range sorted {
		br, tr := b[n], t[n]
		if br.status == tr.status {
			continue
		}
		mark := "  "
		why := ""
		if br.status == "passed" {
			if r, ok := match(n, refusals); ok {
				used[r.pattern] = true
				intended++
				mark, why = "= ", "intended refusal: "+r.reason
			} else {
				unexpected++
				mark = "! "
			}
		}
		fmt.Fprintf(w, "%s%s: %s %s, %s %s\n", mark, n, bn, orNone(br.status), tn, orNone(tr.status))
		if why != "" {
			fmt.Fprintf(w, "      %s\n", why)
		}
		if tr.message != "" {
			fmt.Fprintf(w, "      %s: %s\n", tn, clip(tr.message, 240))
		}
	}
	for _, r := range refusals {
		if used[r.pattern] {
			continue
		}
		for _, n := range sorted {
			if strings.Contains(n, r.pattern) && t[n].status == "passed" {
				fmt.Fprintf(w, "WARNING: %s passed under %s although it is listed as an intended refusal (%s)\n", n, tn, r.reason)
			}
		}
	}
	fmt.Fprintf(w, "\n%d specs pass under %s and fail under %s: %d intended refusals (=), %d not (!)\n",
		intended+unexpected, bn, tn, intended, unexpected)
	if unexpected > 0 {
		return 1
	}
	return 0
}

func match(name string, refusals []refusal) (refusal, bool) {
	for _, r := range refusals {
		if strings.Contains(name, r.pattern) {
			return r, true
		}
	}
	return refusal{}, false
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
