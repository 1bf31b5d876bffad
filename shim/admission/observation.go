package admission

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/spec"
)

// observationDigest validates the runtime's own observation and digests it.
func observationDigest(o spec.Observation) (string, *failure) {
	if err := o.Validate(); err != nil {
		return "", fail(ReasonObservationInvalid, "the runtime's re-derived observation is incomplete: "+err.Error(),
			"check the bundle's process.args and rootfs (gensee observe shows what is derived)")
	}
	d, err := o.Digest()
	if err != nil {
		return "", fail(ReasonObservationInvalid, "digest of the re-derived observation: "+err.Error(), "report this bug")
	}
	return d, nil
}

// checkPreflight compares the optional preflight annotation with the
// re-derived observation. Present and not equal (or not an observation at
// all) refuses: the caller asserted something that is not what runs.
func checkPreflight(data []byte, got spec.Observation, gotDigest string) *failure {
	if len(data) == 0 {
		return nil
	}
	fix := "re-run `gensee observe` on this exact bundle, or drop the annotation " + AnnotationObservation
	pre, err := spec.ParseObservation(data)
	if err != nil {
		return fail(ReasonPreflightMismatch, "annotation "+AnnotationObservation+" is not a valid observation: "+err.Error(), fix)
	}
	want, err := pre.Digest()
	if err != nil {
		return fail(ReasonPreflightMismatch, "annotation "+AnnotationObservation+" cannot be digested: "+err.Error(), fix)
	}
	if want == gotDigest {
		return nil
	}
	return fail(ReasonPreflightMismatch, fmt.Sprintf("annotation %s (%s) differs from the observation re-derived at create (%s) in %s",
		AnnotationObservation, want, gotDigest, diffObservation(*pre, got)), fix)
}

// diffObservation names the fields that differ, for the message.
func diffObservation(a, b spec.Observation) string {
	var out []string
	if a.UID != b.UID || a.GID != b.GID {
		out = append(out, fmt.Sprintf("uid/gid %d/%d vs %d/%d", a.UID, a.GID, b.UID, b.GID))
	}
	if a.ExecutableSHA256 != b.ExecutableSHA256 {
		out = append(out, "executable_sha256")
	}
	if a.CommandDigest != b.CommandDigest {
		out = append(out, "command_digest")
	}
	if len(out) == 0 {
		return "encoding"
	}
	return strings.Join(out, ", ")
}
