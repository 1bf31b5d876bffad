package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/walk"
)

// TreeDigest is the canonical digest of a directory product (blob_set,
// directory_tree): "sha256:" + hex(sha256(L)), where L is one line per entry
// below the slot (the slot itself excluded), sorted bytewise by path:
//
//	path NUL type NUL mode NUL size NUL sha256 LF
//
// path is relative to the slot, '/'-separated; type is file, dir or
// symlink; mode is the original permission bits as 4 octal digits; size is
// decimal (0 for directories, the target length for symlinks); sha256 is
// lowercase hex of the content (of the target string for symlinks, empty for
// directories). Names with NUL, '/' or newlines never reach a digest
// (bad_name), so the encoding is unambiguous and relocatable.
func TreeDigest(slot string, entries []Entry) string {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		rel := strings.TrimPrefix(e.Path, slot+"/")
		lines = append(lines, rel+"\x00"+e.Type+"\x00"+e.Mode+"\x00"+strconv.FormatInt(e.Size, 10)+"\x00"+e.SHA256+"\n")
	}
	return digestLines(lines)
}

// unclaimedLine is one line of Unclaimed.Digest, which is "sha256:" +
// hex(sha256(L)), L being one line per unclaimed change, sorted bytewise:
//
//	strconv.Quote(container-absolute path) SP op LF
//
// Quoting keeps names with newlines or invalid UTF-8 (legal outside
// products) unambiguous.
func unclaimedLine(path string, op change) string {
	return strconv.Quote(path) + " " + op.String() + "\n"
}

func digestLines(lines []string) string {
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// addUnclaimed records a change outside every product.
func (g *gater) addUnclaimed(e *walk.Entry, ch change) {
	if ch == chNone {
		return
	}
	g.res.Unclaimed.Count++
	if e.Kind == walk.KindFile {
		g.res.Unclaimed.Bytes += e.Stat.Size
	}
	g.unclaimed = append(g.unclaimed, unclaimedLine("/"+e.Path, ch))
}

// finishUnclaimed fills in the digest and a short sorted sample and, when
// the contract allows changes only at its products (FailUnclaimed), makes
// each unclaimed change an anomaly, in digest order.
func (g *gater) finishUnclaimed() {
	g.res.Unclaimed.Digest = digestLines(g.unclaimed) // sorts g.unclaimed
	for _, l := range g.unclaimed {
		if len(g.res.Unclaimed.Sample) == 16 {
			break
		}
		q := l[:strings.LastIndexByte(l, ' ')]
		if p, err := strconv.Unquote(q); err == nil {
			g.res.Unclaimed.Sample = append(g.res.Unclaimed.Sample, p)
		}
	}
	if !g.strict {
		return
	}
	for _, l := range g.unclaimed {
		i := strings.LastIndexByte(l, ' ')
		p, err := strconv.Unquote(l[:i])
		if err != nil {
			p = l[:i]
		}
		op := strings.TrimSuffix(l[i+1:], "\n")
		g.res.Anomalies = addViolation(g.res.Anomalies, Violation{Rule: RuleUnclaimedChange, Path: p,
			Detail: op + " outside every declared product and excluded name; the contract's unclaimed \"fail\" allows changes only at its products: declare a product for it or stop writing it"})
	}
}
