// Package spec owns the declarative side of gensee: the contract, catalog,
// inference, observation, manifest, boundary-event, receipt and promotion
// documents, their strict
// decoding and validation, their JSON Schemas, canonical digests, and the DSSE
// signature envelopes that carry the signed ones.
//
// Everything here is pure: no file system, no network, no root. Code that
// touches the kernel lives under shim/ and consumes the plans built here.
// Field names are part of the public interface (docs/design.md §3–4): extend, never
// rename.
package spec
