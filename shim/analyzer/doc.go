// Package analyzer is the runtime's client of a node analyzer
// (docs/design.md §3.1): when a caller attached no inference and its
// selector names an analyzer, the runtime sends the observation it
// re-derived to the analyzer's unix socket and reads back a signed
// inference, or the reason it names no class.
//
// It owns the exchange and nothing else: the dial, the check that the
// socket's peer is root or the runtime's own user, one HTTP/1.1 request,
// and the bounded, strict reading of the answer, all within the selector's
// timeout. What it returns is a claim: shim/admission verifies the
// inference exactly as an annotation's, against the catalog's key for the
// analyzer the selector names.
//
// It must never block past the timeout, never read more than
// spec.MaxAnalyzerAnswer of an answer, never follow a redirect or reuse a
// connection, and never turn a failure into anything but an outcome
// (spec.AnalyzerConsult): a slow, dead or lying analyzer is "no inference".
// The reference analyzer (the server side) lives in shim/analyzer/reference.
package analyzer
