// Package verifier holds the reference semantic verifier of gensee verify
// json-schema: it reads one staged structured_result of an operation (fd
// by fd from the operation directory, never following a symlink, at most
// the bytes the manifest records, and only when they hash to its record),
// judges it against a JSON Schema and makes the receipt a verifier signs
// (spec.Receipt), binding its verdict to that exact product.
//
// A verifier's verdict is guidance: it says what a product means to the
// party the catalog delegates that judgement to. It never promotes,
// never writes an operation's records and never changes a manifest;
// gensee promote (shim/promote) decides, with checks of its own. A JSON
// Schema is compiled with every URL loader disabled: only the schema
// given and the draft meta-schemas the library embeds are ever read.
package verifier
