package netpolicy

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
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
		what := ""
		if got.table.Flags&unix.NFT_TABLE_F_DORMANT != 0 {
			what = " (dormant: the table filters nothing)"
		}
		add("table flags are %#x, want 0%s", got.table.Flags, what)
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

// diffRules aligns the dumped rules to the planned ones (longest common
// subsequence on comment and expressions), so one inserted or deleted rule
// is reported as exactly that rather than as every rule after it shifting.
func diffRules(want, got []*rule) []string {
	wk, gk := ruleKeys(want), ruleKeys(got)
	if slices.Equal(wk, gk) { // every read-back of an intact table
		return nil
	}
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if wk[i] == gk[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var d []string
	var missing []int // want indexes without a match since the last anchor
	var extra []int   // got indexes without a match since the last anchor
	flush := func() {
		// One planned rule replaced by one foreign rule in place: a change.
		if len(missing) == 1 && len(extra) == 1 {
			w, g := want[missing[0]], got[extra[0]]
			d = append(d, fmt.Sprintf("rule %d (%s) changed (handle %d): is %s%s[%s], want [%s]",
				missing[0], ruleName(w), g.handle, chainNote(g, w), commentNote(g, w), strings.Join(g.canonExprs(), " "), strings.Join(w.canonExprs(), " ")))
		} else {
			for _, i := range missing {
				d = append(d, fmt.Sprintf("rule %d (%s) is missing", i, ruleName(want[i])))
			}
			for _, j := range extra {
				d = append(d, fmt.Sprintf("extra rule at position %d (handle %d, chain %s, %s): [%s]", j, got[j].handle, got[j].chain, ruleName(got[j]), strings.Join(got[j].canonExprs(), " ")))
			}
		}
		missing, extra = nil, nil
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && wk[i] == gk[j]:
			flush()
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			extra = append(extra, j)
			j++
		default:
			missing = append(missing, i)
			i++
		}
	}
	flush()
	return d
}

// ruleKeys is what diffRules compares of each rule: its chain, comment and
// expressions, built once per rule (the alignment compares n·m pairs).
func ruleKeys(rs []*rule) []string {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = r.chain + "\x00" + string(r.userData) + "\x00" + strings.Join(r.canonExprs(), " ")
	}
	return keys
}

func chainNote(g, w *rule) string {
	if g.chain != w.chain {
		return "in chain " + g.chain + " "
	}
	return ""
}

func commentNote(g, w *rule) string {
	if !slices.Equal(g.userData, w.userData) {
		return fmt.Sprintf("(comment %q) ", ruleName(g))
	}
	return ""
}

// ruleName is the rule's comment. It parses the userdata TLVs itself:
// userdata.Get in v0.3.0 slices past the end on a malformed length, and a
// dumped rule's userdata is whatever whoever added the rule wrote.
func ruleName(r *rule) string {
	b := r.userData
	for len(b) >= 2 {
		typ, n := b[0], int(b[1])
		if len(b) < 2+n {
			break
		}
		if userdata.Type(typ) == userdata.TypeComment {
			return strings.TrimRight(string(b[2:2+n]), "\x00")
		}
		b = b[2+n:]
	}
	return "no comment"
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
		if !slices.Equal(w.exprs, g.exprs) {
			d = append(d, fmt.Sprintf("set %s gives its elements %v, want %v", w.set.Name, g.exprs, w.exprs))
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

// setString covers what a dump reports but a set's expressions, which
// v0.3.0 does not decode: dumpSetExprs reads their names (and a counter's
// values) into setElems.exprs.
func setString(s *nftables.Set) string {
	return fmt.Sprintf("type %q len %d size %d concat %t interval %t constant %t map %t anonymous %t timeout %t dynamic %t",
		s.KeyType.Name, s.KeyType.Bytes, s.Size, s.Concatenation, s.Interval, s.Constant, s.IsMap, s.Anonymous, s.HasTimeout, s.Dynamic)
}

// diffElems compares a set's elements. A used set's are the keys of the
// set it counts for that the rules added: any of them, each once, none
// planned. A set the rules add to while it is dumped may be read with one
// twice, so a used set's repeats are not told.
func diffElems(want, got *setElems) []string {
	var d []string
	name := want.set.Name
	// A used set's elements are keys of the set it counts for, each with
	// the add's counter.
	used := want.countsFor != nil
	keys, index := want, want.indexKeys()
	if used {
		keys, index = want.countsFor, want.countsFor.indexKeys()
	}
	seen := make([]bool, len(keys.elems))
	var extra, odd []string
	for j, e := range got.elems {
		key := func() string { return keyString(keys.set.Name, e.Key) } // only for what is told
		if carries, ok := got.odd[j]; ok {
			odd = append(odd, "element "+key()+" carries "+carries)
		}
		i, ok := index[string(e.Key)]
		switch {
		case !ok || e.Key == nil:
			extra = append(extra, key())
		case seen[i] && !used:
			odd = append(odd, "duplicate "+key())
		default:
			seen[i] = true
		}
		if used && e.Counter == nil {
			odd = append(odd, "element "+key()+" has no counter")
		}
		if !used && e.Counter != nil {
			odd = append(odd, "element "+key()+" carries a counter")
		}
	}
	if used {
		if len(extra) > 0 {
			d = append(d, fmt.Sprintf("set %s has %d elements not in %s: %s", name, len(extra), keys.set.Name, firstFew(extra)))
		}
		if len(odd) > 0 {
			d = append(d, fmt.Sprintf("set %s: %s", name, firstFew(odd)))
		}
		return d
	}
	var missing []string
	for i, e := range want.elems {
		if !seen[i] {
			what := keyString(name, e.Key)
			if i < len(want.tuples) {
				what = want.tuples[i].String()
			} else if i < len(want.ports) {
				what = want.ports[i].String()
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

// keyString renders a set key the way the plan speaks of it.
func keyString(set string, k []byte) string {
	switch {
	case len(k) == 0:
		return "a catch-all element (matches everything)"
	case (set == setAllow4 && len(k) == 12) || (set == setAllow6 && len(k) == 24):
		a, _ := netip.AddrFromSlice(k[:len(k)-8])
		return Tuple{Addr: a, Proto: k[len(k)-8], Port: binary.BigEndian.Uint16(k[len(k)-4:])}.String()
	case (set == setICMP4 && len(k) == 4) || (set == setICMP6 && len(k) == 16):
		a, _ := netip.AddrFromSlice(k)
		return a.String()
	case set == setServe && len(k) == 8:
		return ServePort{Proto: k[0], Port: binary.BigEndian.Uint16(k[4:])}.String()
	case set == setCgroup && len(k) == 8:
		return fmt.Sprintf("cgroup id %d", binary.NativeEndian.Uint64(k))
	}
	return hex.EncodeToString(k)
}
