package gate

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/walk"
	"github.com/gensee/gensee/spec"
)

// Defaults for caps a contract leaves at 0, and scan-wide caps.
const (
	DefaultMaxBytes    = 64 << 20
	DefaultMaxEntries  = 10_000
	DefaultMaxDepth    = 32
	MaxDepthCeiling    = 256
	DefaultScanEntries = 1_000_000
	DefaultScanDepth   = 512
	// DefaultCompareBytes caps, per run, the bytes of copied-up files that
	// are compared with the image (each side; see the package comment):
	// 2 GiB of reads, seconds even from disk, well inside the default
	// gate_timeout.
	DefaultCompareBytes = 1 << 30
	// FreshSlack absorbs the coarse kernel clock that stamps mtime/ctime,
	// which may lag time.Now() by a tick.
	FreshSlack = 20 * time.Millisecond
)

// DefaultExclusions are the path components never staged or reported as
// unclaimed: VCS metadata, build output, package caches and gensee's own
// control directory.
var DefaultExclusions = []string{".git", "target", "node_modules", ".gensee"}

// Input is what one gate run examines. Exactly one of UpperDir and RootDir
// is set.
type Input struct {
	// UpperDir is the overlay upperdir of the task's rootfs (layout overlay).
	UpperDir string
	// LowerDirs are the overlay lowerdirs, top first: the image; required
	// with UpperDir. The gate asks them whether a path existed in the image
	// (fresh-slot rule; add versus modify). See ParseOverlayOptions.
	LowerDirs []string
	// UserXattr: the overlay was mounted with userxattr, so its markers live
	// in user.overlay.* and trusted.overlay.* ones are forged.
	UserXattr bool
	// RootDir is the rootfs directory itself when it is a bind mount of a
	// single-layer snapshot (layout bind).
	RootDir string
	// Workspace is the contract's workspace, an absolute container path;
	// empty means "/". Slots are relative to it.
	Workspace string
	Products  []spec.Product
	// StagingDir is runtime-owned, e.g. <state>/operations/<opid>/staged;
	// created 0700 if missing. Passing products land at StagingDir/<slot>;
	// an existing entry there is never overwritten (Run fails instead).
	StagingDir string
	// StartTime is when the task was started (for the fresh-slot rule).
	StartTime time.Time
	// Exclusions are path components skipped below the workspace; nil means
	// DefaultExclusions.
	Exclusions []string
	// FailUnclaimed (the contract's unclaimed "fail") fails the gate when
	// there is any unclaimed change: each is an anomaly with rule
	// RuleUnclaimedChange (at most maxViolations listed). Products are still
	// judged and staged on their own; the verdict is fail.
	FailUnclaimed bool
	// ExcludeMounts are the mount destinations of config.json (absolute
	// container paths); runc stubs them into the upperdir.
	ExcludeMounts []string
	// ScanEntries and ScanDepth cap the whole walk; 0 means the defaults.
	// Reaching either fails the gate.
	ScanEntries int64
	ScanDepth   int
	// CompareBytes caps the bytes of copied-up files compared with the
	// image's over the whole run; 0 means DefaultCompareBytes. Reaching it
	// fails the gate (the files past it count as modified).
	CompareBytes int64
	// Baseline is UpperDir as TakeBaseline found it before the workload's
	// first instruction (overlay layout only; nil: none taken). An entry
	// still as it was then is not the workload's: counted in
	// Result.Excluded.Baseline, never unclaimed, never part of a product.
	Baseline *Baseline
	// BaselineOnly stops the run with ErrBeyondBaseline at the first
	// entry that is neither the baseline's, unchanged, nor a mount stub or
	// an excluded name, having read only what the walk reads of every
	// entry (its lstat and overlay xattrs; a regular file opened
	// O_NONBLOCK for them, never read): a run that returns without it read
	// no content the workload wrote. A door runs such a run in its own
	// process, and the full gate in a helper when it stops (shim/service's
	// helperGate). Never sent to a helper.
	BaselineOnly bool `json:"-"`
}

// ErrBeyondBaseline is Run's error under Input.BaselineOnly when the tree
// holds an entry of the workload's.
var ErrBeyondBaseline = errors.New("the upper directory holds more than its baseline")

// layout returns the root directory, walk options and layout name.
func (in *Input) layout() (string, walk.Options, string, error) {
	switch {
	case in.UpperDir != "" && in.RootDir != "":
		return "", walk.Options{}, "", errors.New("gate input: both UpperDir and RootDir set")
	case in.UpperDir != "" && len(in.LowerDirs) == 0:
		return "", walk.Options{}, "", errors.New("gate input: UpperDir without LowerDirs: the image layers are needed to tell fresh slots from image content")
	case in.UpperDir != "":
		ns := "trusted"
		if in.UserXattr {
			ns = "user"
		}
		return in.UpperDir, walk.Options{Overlay: true, XattrNS: ns, Lowers: in.LowerDirs}, LayoutOverlay, nil
	case in.RootDir != "":
		if len(in.LowerDirs) > 0 {
			return "", walk.Options{}, "", errors.New("gate input: LowerDirs given with RootDir (bind layout has no layers)")
		}
		if in.Baseline != nil {
			return "", walk.Options{}, "", errors.New("gate input: Baseline given with RootDir (bind layout: ctime already tells what predates the start)")
		}
		return in.RootDir, walk.Options{}, LayoutBind, nil
	}
	return "", walk.Options{}, "", errors.New("gate input: neither UpperDir nor RootDir set")
}

// containerRel turns an absolute container path into a root-relative one
// ("" for "/"), rejecting anything that is not clean.
func containerRel(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is not absolute", p)
	}
	if p == "/" {
		return "", nil
	}
	if path.Clean(p) != p {
		return "", fmt.Errorf("path %q is not clean", p)
	}
	rel := p[1:]
	if err := checkRel(rel); err != nil {
		return "", fmt.Errorf("path %q: %w", p, err)
	}
	return rel, nil
}

// checkRel validates a '/'-separated relative path: no empty, ".", ".."
// or otherwise unacceptable component.
func checkRel(rel string) error {
	if rel == "" {
		return errors.New("empty path")
	}
	if strings.HasPrefix(rel, "/") {
		return errors.New("absolute path")
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("component %q not allowed", c)
		}
		if why := walk.CheckName(c); why != "" {
			return fmt.Errorf("component %q: %s", c, why)
		}
	}
	return nil
}

// under reports whether p is q or below q (root-relative paths; "" is the
// root and contains everything).
func under(p, q string) bool { return fsafe.Within(p, q) }

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
