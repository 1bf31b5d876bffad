package gate

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/shim/walk"
)

// gater is one gate run: the plan built from Input (pure), then the state
// the walk fills in. Not safe for concurrent use; Run owns it.
type gater struct {
	root        string
	walkOpts    walk.Options
	layout      string
	overlay     bool
	ws          string          // workspace, root-relative ("" is the root)
	excl        map[string]bool // excluded components
	mounts      map[string]bool // mount destinations, root-relative
	structural  map[string]bool // ancestors of the workspace, mounts and slots: never changes
	fresh       time.Time       // StartTime - FreshSlack
	base        *baselineSet    // Input.Baseline; nil: none
	scanEntries int64
	scanDepth   int
	handlers    []handler // declaration order
	patches     int       // valid workspace_patch products: they claim the workspace
	strict      bool      // Input.FailUnclaimed
	onlyBase    bool      // Input.BaselineOnly
	stagingDir  string

	// compareBytes caps the bytes of each side read to compare copy-ups
	// with the image over the whole run; compareLeft is what remains and
	// compareCut records that the cap was reported.
	compareBytes, compareLeft int64
	compareCut                bool

	env       *runEnv // kernel-facing state, set by Run
	res       *Result
	unclaimed []string // UnclaimedDigest lines
}

// newGater validates the runtime input (errors) and the product
// declarations (violations). It has no side effects.
func newGater(in Input) (*gater, error) {
	root, opts, layout, err := in.layout()
	if err != nil {
		return nil, err
	}
	if in.StartTime.IsZero() {
		return nil, errors.New("gate input: StartTime not set")
	}
	if !filepath.IsAbs(in.StagingDir) {
		return nil, fmt.Errorf("gate input: StagingDir %q is not absolute", in.StagingDir)
	}
	wsPath := in.Workspace
	if wsPath == "" {
		wsPath = "/"
	}
	ws, err := containerRel(wsPath)
	if err != nil {
		return nil, fmt.Errorf("gate input: workspace: %w", err)
	}
	g := &gater{
		root: root, walkOpts: opts, layout: layout, overlay: layout == LayoutOverlay, ws: ws,
		excl: map[string]bool{}, mounts: map[string]bool{}, structural: map[string]bool{},
		fresh:        in.StartTime.Add(-FreshSlack),
		scanEntries:  orDefault(in.ScanEntries, DefaultScanEntries),
		scanDepth:    int(orDefault(int64(in.ScanDepth), DefaultScanDepth)),
		compareBytes: orDefault(in.CompareBytes, DefaultCompareBytes),
		stagingDir:   filepath.Clean(in.StagingDir),
		strict:       in.FailUnclaimed,
		onlyBase:     in.BaselineOnly,
		res:          &Result{Layout: layout, Workspace: wsPath, Excluded: Excluded{Names: []string{}}},
	}
	g.compareLeft = g.compareBytes
	if g.base, err = newBaselineSet(in.Baseline, g.fresh); err != nil {
		return nil, err
	}
	if g.overlay {
		g.res.XattrNS = opts.XattrNS
	}
	excl := in.Exclusions
	if excl == nil {
		excl = DefaultExclusions
	}
	for _, x := range excl {
		if err := checkRel(x); err != nil || strings.Contains(x, "/") {
			return nil, fmt.Errorf("gate input: exclusion %q must be a single path component", x)
		}
		g.excl[x] = true
	}
	g.markAncestors(ws, true)
	for _, m := range in.ExcludeMounts {
		rel, err := containerRel(filepath.Clean(m))
		if err != nil {
			return nil, fmt.Errorf("gate input: mount destination: %w", err)
		}
		if rel == "" {
			continue // the rootfs itself
		}
		g.mounts[rel] = true
		g.markAncestors(rel, false)
	}
	g.plan(in.Products)
	return g, nil
}

// markAncestors records the proper ancestors of rel (and rel itself when
// self) as structural: directories that exist to hold something else.
func (g *gater) markAncestors(rel string, self bool) {
	if self && rel != "" {
		g.structural[rel] = true
	}
	for i := range len(rel) {
		if rel[i] == '/' {
			g.structural[rel[:i]] = true
		}
	}
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// parseModes turns ["0644", "755"] into a set of permission bits.
func parseModes(modes []string) (map[uint32]bool, error) {
	if len(modes) == 0 {
		return nil, nil
	}
	set := map[uint32]bool{}
	for _, m := range modes {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 || len(m) < 3 || len(m) > 5 {
			return nil, fmt.Errorf("mode %q: want an octal permission string such as \"0644\"", m)
		}
		set[uint32(v)] = true
	}
	return set, nil
}

func modeString(perm uint32) string { return fmt.Sprintf("%04o", perm) }

// stagedPerm is the mode of a staged copy: no setuid, setgid, sticky or
// group/other write.
func stagedPerm(perm uint32) uint32 { return perm & 0o755 }
