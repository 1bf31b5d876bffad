package trust

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/internal/version"
	"github.com/gensee/gensee/spec"
)

// acceptedSuffix names the note, beside the state file, of the catalog
// file this build last accepted in full (<state file>.accepted).
const acceptedSuffix = ".accepted"

// acceptedMark is that note: the catalog file's sha256 and the build that
// decoded it strictly and validated it.
type acceptedMark struct {
	FileSHA256 string `json:"file_sha256"`
	Build      string `json:"build"`
	// Payload is where the envelope's payload string lies in the file
	// (spec.PayloadSpan), so that the short path decodes the rest of the
	// envelope around it; a span that is not a plain JSON string there
	// costs the whole decode, and whatever the span holds must verify.
	Payload [2]int `json:"payload_span,omitzero"`
	// Contracts is where the payload's contracts object lies in the
	// payload (spec.ContractsSpan), so that the short path finds each
	// contract by its brackets (spec.DecodeKnownCatalogAt); a span that
	// is not that object there costs the decode of the whole payload.
	Contracts [2]int `json:"contracts_span,omitzero"`
}

// spans is where the short path finds the envelope's payload and the
// payload's contracts (acceptedMark).
type spans struct {
	payload, contracts [2]int
}

// acceptedCache is what LoadCatalog uses of a StateStore that remembers
// which catalog file passed the full checks: a file with exactly those
// bytes skips the strict decode and the validation it already passed
// under the same build (never the signature, the validity window or the
// high-water mark). Every shim process loads the catalog on its one
// Create; a catalog of a thousand allow tuples costs ~20 ms to decode
// strictly and validate, ~6 ms to decode whole, ~2 ms to decode with its
// contracts left as JSON until admission asks for one
// (spec.DecodeKnownCatalog).
type acceptedCache interface {
	accepted(fileSHA256 string) (spans, bool)
	markAccepted(fileSHA256 string, sp spans)
}

// cacheBuild is the build a mark must name; a development build ("dev",
// the same for any code) or one of a modified tree ("-dirty": two such
// trees name the same build) never uses marks.
func cacheBuild() (string, bool) {
	v := version.Version
	return v, v != "" && v != "dev" && !strings.HasSuffix(v, "-dirty")
}

// accepted reports whether the mark in the state directory (checked as
// Update checks it: owned by the shim's uid, not group/other-writable)
// names this file and this build, and the spans it noted.
func (s *FileState) accepted(fileSHA256 string) (spans, bool) {
	build, ok := cacheBuild()
	if !ok {
		return spans{}, false
	}
	dir, err := s.openDir()
	if err != nil {
		return spans{}, false
	}
	defer dir.Close()
	f, st, err := fsafe.OpenFileAt(int(dir.Fd()), filepath.Base(s.Path)+acceptedSuffix)
	if err != nil {
		return spans{}, false
	}
	defer f.Close()
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return spans{}, false
	}
	data, err := fsafe.ReadAll(f, st, 1024)
	if err != nil {
		return spans{}, false
	}
	var m acceptedMark
	if json.Unmarshal(data, &m) != nil {
		return spans{}, false
	}
	return spans{payload: m.Payload, contracts: m.Contracts}, m.FileSHA256 == fileSHA256 && m.Build == build
}

// markAccepted notes that this build accepted the catalog file in full.
// Not fsynced: a lost mark costs one full check.
func (s *FileState) markAccepted(fileSHA256 string, sp spans) {
	build, ok := cacheBuild()
	if !ok {
		return
	}
	dir, err := s.openDir()
	if err != nil {
		return
	}
	defer dir.Close()
	b, err := json.Marshal(acceptedMark{FileSHA256: fileSHA256, Build: build, Payload: sp.payload, Contracts: sp.contracts})
	if err != nil {
		return
	}
	_ = fsafe.WriteFileAt(int(dir.Fd()), filepath.Base(s.Path)+acceptedSuffix, bytes.NewReader(b), 0o600, fsafe.NotDurable)
}

// decodeKnown decodes a catalog file whose bytes passed the strict decode
// and the validation before (acceptedCache), as those left it, and
// verifies the signature again (spec.DecodeKnownEnvelope runs the
// envelope's checks but the payload's base64, which DecodePayload decodes
// as strictly). What it skips, the strict token walk and Catalog.Validate,
// a forged mark would skip too: whoever can write the state directory can
// already reset the high-water mark, and still gets only payloads the
// anchor signed. ok is false when anything differs: the full path then
// decides.
func decodeKnown(data []byte, sp spans, anchor ed25519.PublicKey) (cat *spec.Catalog, payload []byte, ok bool) {
	env, err := spec.DecodeKnownEnvelopeAt(data, sp.payload[0], sp.payload[1])
	if err != nil {
		env, err = spec.DecodeKnownEnvelope(data)
	}
	if err != nil || env.PayloadType != spec.PayloadTypeCatalog || len(anchor) != ed25519.PublicKeySize {
		return nil, nil, false
	}
	if payload, err = env.DecodePayload(); err != nil {
		return nil, nil, false
	}
	// The signature is checked beside the payload's decode; the decode is
	// used only if it verified.
	verified := make(chan error, 1)
	go func() {
		verified <- env.VerifyPayload(spec.PayloadTypeCatalog, payload, []ed25519.PublicKey{anchor}, 1)
	}()
	c, err := spec.DecodeKnownCatalogAt(payload, sp.contracts[0], sp.contracts[1])
	if err != nil {
		c, err = spec.DecodeKnownCatalog(payload)
	}
	if verr := <-verified; verr != nil || err != nil {
		return nil, nil, false
	}
	return c, payload, true
}

// fileDigest is the hex sha256 of a catalog file's bytes.
func fileDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
