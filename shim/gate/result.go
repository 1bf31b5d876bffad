package gate

// Verdict is pass or fail.
type Verdict string

// Verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
)

// Layouts of the rootfs the gate read.
const (
	LayoutOverlay = "overlay" // an overlay upperdir with its image layers
	LayoutBind    = "bind"    // a plain directory: no whiteouts, no deletions visible
)

// Violation is one broken rule. Rule names are stable (see rules.go). Path is
// workspace-relative for product violations and container-absolute for
// anomalies.
type Violation struct {
	Rule   string `json:"rule"`
	Path   string `json:"path,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Result is the outcome of one gate run.
type Result struct {
	Verdict   Verdict         `json:"verdict"`
	Layout    string          `json:"layout"`
	XattrNS   string          `json:"xattr_namespace,omitempty"`
	Workspace string          `json:"workspace"`
	Products  []ProductResult `json:"products"`
	Anomalies []Violation     `json:"anomalies,omitempty"`
	Unclaimed Unclaimed       `json:"unclaimed"`
	Excluded  Excluded        `json:"excluded"`
	Scanned   int64           `json:"scanned_entries"`
}

// ProductResult is the verdict on one declared product.
type ProductResult struct {
	Slot       string      `json:"slot"`
	Class      string      `json:"class"`
	Verdict    Verdict     `json:"verdict"`
	Violations []Violation `json:"violations,omitempty"`
	Entries    []Entry     `json:"entries,omitempty"`
	Bytes      int64       `json:"bytes"`                 // content bytes of regular files
	SHA256     string      `json:"sha256,omitempty"`      // single-file products; the patch file for workspace_patch
	TreeDigest string      `json:"tree_digest,omitempty"` // blob_set and directory_tree, see TreeDigest
	Staged     string      `json:"staged,omitempty"`      // path of the staged copy; empty unless passed
}

// Entry is one file, directory or symlink of a product, or one line of a
// workspace patch. Path is workspace-relative; Mode is the original
// permission bits in octal (setuid and friends included, though staged
// copies drop them).
type Entry struct {
	Op     string `json:"op,omitempty"` // workspace_patch only: add, modify, delete
	Path   string `json:"path"`
	Type   string `json:"type,omitempty"` // file, dir, symlink
	Mode   string `json:"mode,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // content; symlinks: of the target string
	Target string `json:"target,omitempty"` // symlinks, recorded, never followed
}

// Unclaimed summarizes changes (add, modify, delete, replace) outside every
// product, exclusion and mount stub. Digest covers all of them (see
// unclaimedLine in digest.go: sorted lines `"<quoted absolute path>" op`);
// Sample holds the first few paths in that order.
type Unclaimed struct {
	Count  int64    `json:"count"`
	Bytes  int64    `json:"bytes"`
	Digest string   `json:"digest"`
	Sample []string `json:"sample,omitempty"`
}

// Excluded counts what the gate skipped on purpose: excluded subtrees (each
// counted once, at its top), mount-point stubs, and entries still as the
// baseline found them before the workload started (Input.Baseline;
// structural directories aside, which are never changes).
type Excluded struct {
	Entries    int64    `json:"entries"`
	MountStubs int64    `json:"mount_stubs"`
	Baseline   int64    `json:"baseline"`
	Names      []string `json:"names"`
}
