package spec

import "errors"

// Sentinel errors. Every error this package returns for outside input wraps
// one of them, so callers classify with errors.Is and never match strings.
var (
	// ErrTooLarge: the input exceeds the size cap for its document kind.
	ErrTooLarge = errors.New("document too large")
	// ErrMalformed: the input is not strict JSON of the expected shape
	// (syntax, duplicate or case-folded keys, unknown fields, wrong types,
	// floats, null, trailing data, bad base64).
	ErrMalformed = errors.New("malformed document")
	// ErrInvalid: the document decoded but breaks a validation rule.
	ErrInvalid = errors.New("invalid document")
	// ErrPayloadType: a DSSE envelope carries a different payloadType
	// than the one the caller pinned.
	ErrPayloadType = errors.New("unexpected payload type")
	// ErrSignature: fewer distinct trusted keys than the threshold produced
	// valid signatures over the envelope.
	ErrSignature = errors.New("signature verification failed")
	// ErrKey: a key is not well formed (length, hex encoding).
	ErrKey = errors.New("invalid key")
	// ErrFloat: a number with a fraction or exponent where only integers
	// are allowed (canonical JSON, integer fields).
	ErrFloat = errors.New("non-integer number")
)
