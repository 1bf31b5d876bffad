package spec

import (
	"fmt"
	"maps"
	"slices"
)

// Validate checks a catalog payload: schema, version, validity window,
// every contract (paths "contracts.<id>..."), analyzers, selectors and
// verifiers, and the references between them. It returns every broken rule.
func (c *Catalog) Validate() error {
	p := newProblems()
	checkSchema(p, c.Schema, SchemaCatalog)
	if c.Version < 1 {
		p.add("version", "must be at least 1")
	}
	checkWindow(p, c.IssuedAt, c.ExpiresAt)
	ids := c.ContractIDs() // a DecodeKnownCatalog catalog holds them as JSON
	if len(ids) == 0 {
		p.add("contracts", "at least one contract is required")
	}
	for _, id := range ids {
		ct, ok := c.Contract(id)
		cp := p.at(joinKey("contracts", id))
		if !ok {
			cp.add("", "does not decode")
			continue
		}
		if ct.ID != id {
			cp.addf("id", "%q must equal its key in contracts (%q)", truncate(ct.ID, 80), truncate(id, 80))
		}
		ct.check(cp)
	}
	classes := c.checkAnalyzers(p)
	c.checkSelectors(p, classes)
	c.checkVerifiers(p)
	return p.err()
}

// checkAnalyzers validates analyzers and returns the classes they scope.
func (c *Catalog) checkAnalyzers(p problems) map[string]bool {
	classes := map[string]bool{}
	ids := map[string]int{}
	for i, a := range c.Analyzers {
		ap := p.at(joinIndex("analyzers", i))
		checkEntryID(ap, "analyzer id", "analyzers", i, a.ID, ids)
		if len(a.Models) == 0 {
			ap.add("models", "at least one model id is required")
		}
		checkUnique(ap, "models", a.Models, func(mp problems, s string) { checkModel(mp, "", s) })
		checkHex64(ap, "public_key", "an ed25519 public key", a.PublicKey)
		if len(a.Classes) == 0 {
			ap.add("classes", "at least one class is required")
		}
		checkUnique(ap, "classes", a.Classes, func(cp problems, s string) { checkID(cp, "", "class", s) })
		for _, s := range a.Classes {
			classes[s] = true
		}
		checkBP(ap, "min_confidence_bp", a.MinConfidenceBP)
		checkBP(ap, "min_margin_bp", a.MinMarginBP)
		checkMaxLifetime(ap, a.MaxLifetime, "1h")
		if a.RulesKey != "" {
			checkHex64(ap, "rules_key", "an ed25519 public key", a.RulesKey)
		}
	}
	return classes
}

// checkVerifiers validates verifiers: unique ids, a key, at least one
// product class (each a known one, once), a positive max_lifetime.
func (c *Catalog) checkVerifiers(p problems) {
	ids := map[string]int{}
	for i, v := range c.Verifiers {
		vp := p.at(joinIndex("verifiers", i))
		checkEntryID(vp, "verifier id", "verifiers", i, v.ID, ids)
		checkHex64(vp, "public_key", "an ed25519 public key", v.PublicKey)
		if len(v.Classes) == 0 {
			vp.add("classes", "at least one product class is required")
		}
		checkUnique(vp, "classes", v.Classes, func(cp problems, s string) {
			if !knownClass(s) {
				cp.addf("", "%q is not a product class: use blob, blob_set, directory_tree, workspace_patch, structured_result or environment_snapshot", truncate(s, 80))
			}
		})
		checkMaxLifetime(vp, v.MaxLifetime, "24h")
	}
}

func (c *Catalog) checkSelectors(p problems, classes map[string]bool) {
	if len(c.Selectors) == 0 {
		p.add("selectors", "at least one selector is required")
	}
	ids := map[string]int{}
	matches := map[SelectorMatch]int{}
	for i, s := range c.Selectors {
		sp := p.at(joinIndex("selectors", i))
		checkEntryID(sp, "selector id", "selectors", i, s.ID, ids)
		if s.Match.check(sp.at("match")) {
			if j, dup := matches[s.Match]; dup {
				sp.addf("match", "matches the same facts as selectors[%d]; exactly one selector must match a caller", j)
			} else {
				matches[s.Match] = i
			}
		}
		for _, class := range slices.Sorted(maps.Keys(s.Routes)) {
			rp := sp.at(joinKey("routes", class))
			checkID(rp, "", "class", class)
			if class != "" && !classes[class] {
				rp.addf("", "class %q is in no analyzer's classes, so no inference can name it", truncate(class, 80))
			}
			if id := s.Routes[class]; !c.hasContract(id) {
				rp.addf("", "%q is not a contract in this catalog", truncate(id, 80))
			}
		}
		if s.SafeDefault != "" && !c.hasContract(s.SafeDefault) {
			sp.addf("safe_default", "%q is not a contract in this catalog", truncate(s.SafeDefault, 80))
		}
		c.checkSelectorAnalyzer(sp, s.Analyzer)
		checkVolatile(sp, s.VolatileEnv)
		if len(s.Routes) == 0 && s.SafeDefault == "" {
			sp.add("", "admits nothing: add routes or a safe_default")
		}
	}
}

func (c *Catalog) hasContract(id string) bool {
	if id == "" {
		return false
	}
	_, ok := c.Contract(id)
	return ok
}

// check validates the facts; it reports whether the match is usable.
func (m SelectorMatch) check(p problems) bool {
	ok := true
	set := false
	for _, f := range []struct{ name, v string }{
		{"containerd_namespace", m.ContainerdNamespace}, {"runtime", m.Runtime}, {"k8s_namespace", m.K8sNamespace}, {"user", m.User},
	} {
		if f.v == "" {
			continue
		}
		set = true
		if len(f.v) > maxFactLen || !printable(f.v) {
			p.addf(f.name, "%q must be 1-%d printable characters without spaces", truncate(f.v, 80), maxFactLen)
			ok = false
		}
	}
	if m.User != "" && !ValidUser(m.User) {
		p.addf("user", "%q must be a login name (lower case letters, digits, '_', '-', up to 32, not starting with a digit or '-') or a decimal uid below 4294967295", truncate(m.User, 80))
		ok = false
	}
	if !set {
		p.add("", "at least one of containerd_namespace, runtime, k8s_namespace, user is required; selectors have no wildcards")
	}
	return ok && set
}

// checkUnique runs each on every item and reports repeats.
func checkUnique(p problems, path string, items []string, each func(problems, string)) {
	seen := map[string]int{}
	for i, s := range items {
		ip := p.at(joinIndex(path, i))
		each(ip, s)
		if j, dup := seen[s]; dup {
			ip.addf("", "%q duplicates %s[%d]", truncate(s, 80), path, j)
			continue
		}
		seen[s] = i
	}
}

func checkBP(p problems, path string, v int) {
	if v < 0 || v > maxBP {
		p.add(path, fmt.Sprintf("%d is out of range 0-10000 (basis points)", v))
	}
}

// checkEntryID checks the id of entry i of a list (what names it) and
// that no entry before it has the same one; ids maps each id to the first
// entry that had it.
func checkEntryID(p problems, what, list string, i int, id string, ids map[string]int) {
	checkID(p, "id", what, id)
	if j, dup := ids[id]; dup && id != "" {
		p.addf("id", "%q duplicates %s[%d].id", id, list, j)
	} else {
		ids[id] = i
	}
}

// checkMaxLifetime checks a required max_lifetime (example: a duration to
// suggest).
func checkMaxLifetime(p problems, v, example string) {
	if v == "" {
		p.add("max_lifetime", "is required: a Go duration such as \""+example+"\"")
		return
	}
	checkDuration(p, "max_lifetime", v)
}
