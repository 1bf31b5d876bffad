package reference

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// run is what an earlier manifest says for history: the analyzer whose
// inference admitted it, the observation and class it ran under, and how
// it ended (spec.Manifest.HistoryVerdict, and why).
type run struct {
	analyzer string // the inference's analyzer
	digest   string // the manifest's observation_digest
	class    string // spec.Manifest.HistoryClass: "" when admitted by safe_default
	verdict  spec.HistoryVerdict
	why      string
}

// history weighs the request's references for observation digest: the
// clean runs per class, and the classes an unclean run withholds (with
// why: the operation and what went wrong). Only runs this analyzer's
// inference admitted count. A reference that cannot be read, does not
// hash to its sha256 or does not parse is logged and ignored.
func (a *Analyzer) history(ctx context.Context, refs []spec.HistoryRef, digest string) (map[string]int, map[string]string) {
	if a.rules.History == nil || a.records == "" || len(refs) == 0 {
		return nil, nil
	}
	refs = refs[:min(len(refs), spec.MaxHistoryRefs)]
	counts, withheld := map[string]int{}, map[string]string{}
	seen := map[string]bool{} // an operation named twice counts once
	for _, ref := range refs {
		if seen[ref.OperationID] {
			continue
		}
		seen[ref.OperationID] = true
		r, err := a.readRun(ref)
		if err != nil {
			log.G(ctx).WithError(err).WithField("operation_id", ref.OperationID).Warn("analyzer: history reference ignored")
			continue
		}
		if r.analyzer != a.entry.ID || r.digest != digest || r.class == "" {
			continue
		}
		switch r.verdict {
		case spec.HistoryClean:
			counts[r.class]++
		case spec.HistoryUnclean:
			if _, ok := withheld[r.class]; !ok {
				withheld[r.class] = ref.OperationID + " (" + r.why + ")"
			}
		}
	}
	return counts, withheld
}

// readRun reads the manifest ref names, through the cache of manifests
// already read (a manifest is written once).
func (a *Analyzer) readRun(ref spec.HistoryRef) (run, error) {
	if !record.ValidOperationID(ref.OperationID) {
		return run{}, fmt.Errorf("operation id %q is malformed", spec.Truncate(ref.OperationID, 40))
	}
	key := ref.OperationID + ":" + ref.ManifestSHA256
	if r, ok := a.seen.get(key); ok {
		return r, nil
	}
	data, err := readManifest(a.records, ref.OperationID)
	if err != nil {
		return run{}, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != ref.ManifestSHA256 {
		return run{}, fmt.Errorf("manifest sha256 is %s, the reference names %s", got, spec.Truncate(ref.ManifestSHA256, 64))
	}
	m, err := spec.ParseManifest(data)
	if err != nil {
		return run{}, err
	}
	r := run{analyzer: m.Inference.Analyzer, digest: m.ObservationDigest, class: m.HistoryClass()}
	r.verdict, r.why = m.HistoryVerdict()
	r.why = spec.Truncate(r.why, 120)
	a.seen.put(key, r)
	return r, nil
}

// readManifest reads <records>/<opid>/manifest.json below the records
// directory without following any symlink or leaving it, at most
// spec.MaxManifestBytes.
func readManifest(records, opid string) ([]byte, error) {
	dir, err := fsafe.RetryEINTR(func() (int, error) {
		return unix.Open(records, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: records, Err: err}
	}
	defer unix.Close(dir)
	name := opid + "/" + record.ManifestFile
	fd, err := fsafe.Openat2(dir, name, fsafe.ReadFlags, fsafe.ResolveConfined)
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &fsafe.NotRegularError{Path: name, Mode: st.Mode}
	}
	return fsafe.ReadAll(f, &st, spec.MaxManifestBytes)
}

// seenCache remembers runs by operation id and manifest sha256, so a
// manifest is read and parsed once. It holds at most maxSeen entries and
// forgets them all when full.
type seenCache struct {
	mu   sync.Mutex
	runs map[string]run // guarded by mu
}

const maxSeen = 4096

func newSeenCache() *seenCache { return &seenCache{runs: map[string]run{}} }

func (c *seenCache) get(key string) (run, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.runs[key]
	return r, ok
}

func (c *seenCache) put(key string, r run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) >= maxSeen {
		clear(c.runs)
	}
	c.runs[key] = r
}
