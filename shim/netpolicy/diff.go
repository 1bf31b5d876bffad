package netpolicy

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// DriftError reports how an installed table differs from its plan: evidence
// that the boundary is not (or no longer) what was admitted.
type DriftError struct {
	Table string
	Diffs []string
}

func (e *DriftError) Error() string {
	const show = 5
	d := e.Diffs
	more := ""
	if len(d) > show {
		more = fmt.Sprintf(" (and %d more)", len(d)-show)
		d = d[:show]
	}
	return fmt.Sprintf("table inet %s differs from its plan: %s%s", e.Table, strings.Join(d, "; "), more)
}

// diff compares a dumped ruleset to the one built from the plan and lists
// every difference. Pure.
func diff(want, got *ruleset) []string {
	var d []string
	add := func(format string, a ...any) { d = append(d, fmt.Sprintf(format, a...)) }

	if got.table.Flags != 0 {
		add("table flags are %#x, want 0 (a dormant table filters nothing)", got.table.Flags)
	}
	d = append(d, diffChains(want.chains, got.chains)...)
	d = append(d, diffRules(want.rules, got.rules)...)
	d = append(d, diffSets(want.sets, got.sets)...)

	var wc, gc []string
	for _, c := range want.counters {
		wc = append(wc, c.Name)
	}
	for _, c := range got.counters {
		gc = append(gc, c.Name)
	}
	slices.Sort(wc)
	slices.Sort(gc)
	if !slices.Equal(wc, gc) {
		add("named counters are %v, want %v", gc, wc)
	}
	return d
}

func diffChains(want, got []*nftables.Chain) []string {
	var d []string
	byName := map[string]*nftables.Chain{}
	for _, c := range got {
		byName[c.Name] = c
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		if !ok {
			d = append(d, "chain "+w.Name+" is missing")
			continue
		}
		delete(byName, w.Name)
		if ws, gs := chainString(w), chainString(g); ws != gs {
			d = append(d, fmt.Sprintf("chain %s is {%s}, want {%s}", w.Name, gs, ws))
		}
	}
	for _, c := range got {
		if _, extra := byName[c.Name]; extra {
			d = append(d, fmt.Sprintf("extra chain %s {%s}", c.Name, chainString(c)))
		}
	}
	return d
}

func chainString(c *nftables.Chain) string {
	s := fmt.Sprintf("type %s", c.Type)
	if c.Hooknum != nil {
		s += fmt.Sprintf(" hook %d", *c.Hooknum)
	}
	if c.Priority != nil {
		s += fmt.Sprintf(" priority %d", *c.Priority)
	}
	if c.Policy != nil {
		s += fmt.Sprintf(" policy %d", *c.Policy)
	}
	if c.Device != "" {
		s += " device " + c.Device
	}
	return s
}

func diffRules(want, got []*nftables.Rule) []string {
	var d []string
	if len(want) != len(got) {
		d = append(d, fmt.Sprintf("chain has %d rules, want %d", len(got), len(want)))
	}
	for i := 0; i < len(want) || i < len(got); i++ {
		switch {
		case i >= len(got):
			d = append(d, fmt.Sprintf("rule %d (%s) is missing", i, ruleName(want[i])))
		case i >= len(want):
			d = append(d, fmt.Sprintf("extra rule %d (handle %d): %s", i, got[i].Handle, exprsString(got[i].Exprs)))
		default:
			if got[i].Chain != nil && got[i].Chain.Name != want[i].Chain.Name {
				d = append(d, fmt.Sprintf("rule %d is in chain %s, want %s", i, got[i].Chain.Name, want[i].Chain.Name))
			}
			if !slices.Equal(got[i].UserData, want[i].UserData) {
				d = append(d, fmt.Sprintf("rule %d (handle %d) is %q, want %q", i, got[i].Handle, ruleName(got[i]), ruleName(want[i])))
			}
			if ws, gs := exprsString(want[i].Exprs), exprsString(got[i].Exprs); ws != gs {
				d = append(d, fmt.Sprintf("rule %d (%s, handle %d) is %s, want %s", i, ruleName(want[i]), got[i].Handle, gs, ws))
			}
		}
	}
	return d
}

func ruleName(r *nftables.Rule) string {
	if len(r.UserData) > 3 {
		return strings.TrimRight(string(r.UserData[2:]), "\x00")
	}
	return "no comment"
}

// exprsString renders expressions canonically for comparison, leaving out
// what the kernel does not echo (a lookup's batch-local set id) and what
// changes at run time (counter values).
func exprsString(es []expr.Any) string {
	parts := make([]string, len(es))
	for i, e := range es {
		switch v := e.(type) {
		case *expr.Lookup:
			c := *v
			c.SetID = 0
			e = &c
		case *expr.Counter:
			e = &expr.Counter{}
		}
		parts[i] = fmt.Sprintf("%s%+v", reflect.TypeOf(e).Elem().Name(), reflect.ValueOf(e).Elem().Interface())
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func diffSets(want, got []*setElems) []string {
	var d []string
	byName := map[string]*setElems{}
	for _, s := range got {
		byName[s.set.Name] = s
	}
	for _, w := range want {
		g, ok := byName[w.set.Name]
		if !ok {
			d = append(d, "set "+w.set.Name+" is missing")
			continue
		}
		delete(byName, w.set.Name)
		if ws, gs := setString(w.set), setString(g.set); ws != gs {
			d = append(d, fmt.Sprintf("set %s is {%s}, want {%s}", w.set.Name, gs, ws))
		}
		d = append(d, diffElems(w, g)...)
	}
	for _, s := range got {
		if _, extra := byName[s.set.Name]; extra {
			d = append(d, fmt.Sprintf("extra set %s {%s} with %d elements", s.set.Name, setString(s.set), len(s.elems)))
		}
	}
	return d
}

// setString covers what a dump reports. v0.3.0 does not decode a set's
// counter flag; diffElems checks each element carries a counter instead.
func setString(s *nftables.Set) string {
	return fmt.Sprintf("type %q len %d concat %t interval %t constant %t map %t anonymous %t timeout %t dynamic %t",
		s.KeyType.Name, s.KeyType.Bytes, s.Concatenation, s.Interval, s.Constant, s.IsMap, s.Anonymous, s.HasTimeout, s.Dynamic)
}

func diffElems(want, got *setElems) []string {
	var d []string
	name := want.set.Name
	wantKeys := map[string]bool{}
	for _, e := range want.elems {
		wantKeys[string(e.Key)] = true
	}
	var extra, odd []string
	seen := map[string]bool{}
	for _, e := range got.elems {
		k := string(e.Key)
		switch {
		case !wantKeys[k]:
			extra = append(extra, hex.EncodeToString(e.Key))
		case seen[k]:
			odd = append(odd, "duplicate "+hex.EncodeToString(e.Key))
		}
		seen[k] = true
		if len(e.Val) > 0 || len(e.KeyEnd) > 0 || e.IntervalEnd || e.Timeout != 0 || e.VerdictData != nil {
			odd = append(odd, "element "+hex.EncodeToString(e.Key)+" carries data, an interval end or a timeout")
		}
		if want.set.Counter && e.Counter == nil {
			odd = append(odd, "element "+hex.EncodeToString(e.Key)+" has no counter")
		}
	}
	var missing []string
	for i, e := range want.elems {
		if !seen[string(e.Key)] {
			what := hex.EncodeToString(e.Key)
			if i < len(want.tuples) {
				what = want.tuples[i].String()
			}
			missing = append(missing, what)
		}
	}
	if len(missing) > 0 {
		d = append(d, fmt.Sprintf("set %s lacks %d elements: %s", name, len(missing), firstFew(missing)))
	}
	if len(extra) > 0 {
		d = append(d, fmt.Sprintf("set %s has %d extra elements: %s", name, len(extra), firstFew(extra)))
	}
	if len(odd) > 0 {
		d = append(d, fmt.Sprintf("set %s: %s", name, firstFew(odd)))
	}
	return d
}

func firstFew(s []string) string {
	if len(s) > 3 {
		return strings.Join(s[:3], ", ") + ", …"
	}
	return strings.Join(s, ", ")
}
