// Package verifier holds the reference semantic verifier of gensee verify
// json-schema: it reads one staged structured_result of an operation (fd
// by fd from the operation directory, never following a symlink, at most
// the bytes the manifest records, and only when they hash to its record)
// and makes the receipt a verifier signs (spec.Receipt), binding its
// verdict to that exact product.
//
// The verdict itself comes from the judge, gensee-verifier
// (cmd/gensee-verifier, shim/verifier/schema): a JSON Schema judged in a
// child process that speaks the judge protocol defined here
// (JudgeRequest, JudgeAnswer), so that neither the JSON Schema library
// nor its parsing of a workload's product runs in gensee itself.
//
// A verifier's verdict is guidance: it says what a product means to the
// party the catalog delegates that judgement to. It never promotes,
// never writes an operation's records and never changes a manifest;
// gensee promote (shim/promote) decides, with checks of its own.
package verifier
