package cli

import (
	"encoding/json"
	"errors"
	"path"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/spec"
)

// in-toto Statement v1 (https://github.com/in-toto/attestation, spec/v1),
// written with the standard library: the statement is four fields and a
// ResourceDescriptor needs only name and digest here.
const (
	inTotoStatementType = "https://in-toto.io/Statement/v1"
	inTotoPredicateType = "https://gensee.dev/effect-manifest/v1"
)

type inTotoStmt struct {
	Type          string          `json:"_type"`
	Subject       []inTotoSubject `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type inTotoSubject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// newInTotoStatement wraps the stored manifest as the predicate; the subjects
// are the staged files it records: a single-file product or a patch as its
// slot, a directory product as one subject per regular file, named
// <slot>/<path>. Directories and symlinks have no content to attest.
// The in-toto spec requires at least one subject, so an operation that
// staged nothing is refused (exit 1).
func newInTotoStatement(op *operation) (*inTotoStmt, error) {
	st := &inTotoStmt{Type: inTotoStatementType, PredicateType: inTotoPredicateType, Predicate: op.raw}
	for _, p := range op.m.Products {
		if p.Verdict != spec.VerdictPass || p.Staged == "" {
			continue
		}
		if !gate.TreeClass(p.Class) {
			if p.SHA256 != "" {
				st.Subject = append(st.Subject, subject(p.Slot, p.SHA256))
			}
			continue
		}
		for _, e := range p.Entries {
			if e.Type == "file" && e.SHA256 != "" {
				st.Subject = append(st.Subject, subject(path.Join(p.Slot, gate.EntryRel(p.Slot, e.Path)), e.SHA256))
			}
		}
	}
	if len(st.Subject) == 0 {
		return nil, fail(ExitRefused, "make in-toto statement for operation "+op.id,
			errors.New("the operation staged no product file, and a Statement needs at least one subject"),
			"use --json for the manifest itself")
	}
	return st, nil
}

func subject(name, sha string) inTotoSubject {
	return inTotoSubject{Name: name, Digest: map[string]string{"sha256": sha}}
}
