package gate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gensee/gensee/shim/walk"
)

// errScanStopped ends the walk when the scan-wide entry cap is reached.
var errScanStopped = errors.New("scan stopped at the entry cap")

type owner struct {
	h    handler
	root bool
	rel  string
}

// visit is the walk callback: it routes each entry to the products that
// own it, accounts unclaimed changes and decides whether to descend.
//
// Order of checks: scan cap, mount stubs, exclusions (these end the
// subtree unread), then overlay markers and walk errors (anomalies), then
// the baseline (an entry as it was before the start is no change and no
// product's) or else the change against the image (a copy-up that could
// not be compared is an anomaly too), then the owning products and the
// unclaimed listing.
func (g *gater) visit(e *walk.Entry) (bool, error) {
	g.res.Scanned++
	p := e.Path
	if g.res.Scanned > g.scanEntries {
		g.anomaly(RuleOverMaxEntries, p, fmt.Sprintf("the rootfs diff has more than %d entries; raise the scan cap or exclude build output", g.scanEntries))
		return false, errScanStopped
	}
	if g.mounts[p] {
		g.res.Excluded.MountStubs++
		return false, nil
	}
	inWS := under(p, g.ws)
	wsPath := "/" + p
	if inWS {
		wsPath = strings.TrimPrefix(strings.TrimPrefix(p, g.ws), "/")
		if wsPath != "" && g.excl[e.Name] {
			g.res.Excluded.Entries++
			g.noteExcluded(wsPath)
			return false, nil
		}
	}
	if g.onlyBase && (e.Err != nil || !g.base.holds(e)) {
		return false, ErrBeyondBaseline
	}
	structural := g.structural[p]
	owners := g.owners(e, wsPath)
	for _, m := range e.Marks {
		g.anomaly(m.Rule, p, m.Detail)
		for _, o := range owners {
			o.h.base().violate(m.Rule, wsPath, m.Detail)
		}
	}
	if e.Err != nil {
		rule := RuleUnreadable
		if errors.Is(e.Err, walk.ErrChanged) {
			rule = RuleChanged
		}
		g.anomaly(rule, p, e.Err.Error())
		for _, o := range owners {
			o.h.base().violate(rule, wsPath, e.Err.Error())
			if o.root {
				o.h.base().resolved = true
			}
		}
		return false, nil
	}
	v := &visit{e: e, path: wsPath, before: g.base.holds(e)}
	if v.before {
		// Not the workload's: no change (so no unclaimed line and no patch
		// line), and below (a directory) whatever the workload did write.
		if !structural {
			g.res.Excluded.Baseline++
		}
	} else {
		var bad *Violation
		if v.ch, bad = g.changeOf(e, structural); bad != nil {
			g.anomaly(bad.Rule, p, bad.Detail)
			for _, o := range owners {
				o.h.base().violate(bad.Rule, wsPath, bad.Detail)
			}
		}
	}
	descend, claimed := structural, inWS && g.patches > 0
	for _, o := range owners {
		b := o.h.base()
		_, isPatch := o.h.(*patchProduct)
		if !isPatch {
			claimed = true
		}
		if b.stopped {
			continue
		}
		if v.before && e.Kind != walk.KindDir && !isPatch {
			// A product never holds what was there before the start; a
			// directory is the container of what is below it, judged
			// there (treeProduct.finish for the slot itself).
			b.violate(RulePartial, wsPath, baselineDetail)
			b.resolved = b.resolved || o.root
			continue
		}
		v.rel = o.rel
		var d bool
		var err error
		if o.root {
			d, err = o.h.root(g, v)
		} else {
			d, err = o.h.child(g, v)
		}
		if err != nil {
			return false, err
		}
		descend = descend || d
	}
	if !claimed {
		g.addUnclaimed(e, v.ch)
		descend = true
	}
	if !descend || e.Kind != walk.KindDir {
		return false, nil
	}
	if e.Depth >= g.scanDepth {
		g.anomaly(RuleOverMaxDepth, p, fmt.Sprintf("nesting deeper than %d levels; not scanned further", g.scanDepth))
		for _, o := range owners {
			o.h.base().stop(RuleOverMaxDepth, wsPath, "the scan depth cap cut this product")
		}
		return false, nil
	}
	return true, nil
}

// owners returns the valid products whose path is e's or an ancestor of
// it, and lets products whose slot lies below e check e as an ancestor.
func (g *gater) owners(e *walk.Entry, wsPath string) []owner {
	var out []owner
	p := e.Path
	for _, h := range g.handlers {
		b := h.base()
		switch {
		case !b.valid:
		case p == b.upath:
			out = append(out, owner{h: h, root: true})
		case under(p, b.upath):
			rel := p
			if b.upath != "" {
				rel = p[len(b.upath)+1:]
			}
			out = append(out, owner{h: h, rel: rel})
		case strings.HasPrefix(b.upath, p+"/"):
			b.ancestor(e, wsPath)
		}
	}
	return out
}

func (g *gater) anomaly(rule, p, detail string) {
	g.res.Anomalies = addViolation(g.res.Anomalies, Violation{Rule: rule, Path: "/" + p, Detail: detail})
}

func (g *gater) noteExcluded(wsPath string) {
	if len(g.res.Excluded.Names) < maxViolations {
		g.res.Excluded.Names = append(g.res.Excluded.Names, wsPath)
	}
}
