package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"unicode/utf8"
)

// maxDepth bounds the nesting of any outside document. Our documents nest
// at most six levels; the cap keeps hostile input from costing stack.
const maxDepth = 32

// DecodeError says where in a JSON document strict decoding failed. Path is
// a JSON path such as "network.allow[0].ip" ("" for the document itself).
type DecodeError struct {
	Path string
	Msg  string
	Err  error // ErrMalformed or ErrTooLarge
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeStrict decodes one JSON value from data into v, which must be a
// non-nil pointer. Unlike encoding/json it refuses, naming the JSON path:
// input over maxBytes, invalid UTF-8, duplicate object keys at any depth,
// keys that match a struct field only case-insensitively, unknown fields,
// JSON null anywhere except into a pointer or interface, numbers with a
// fraction or exponent (or out of range) for integer fields, values of the
// wrong JSON type, nesting deeper than 32, and trailing data after the value.
//
// The check is a token walk that follows v's type (exact json tag names via
// reflection); only when it passes does encoding/json fill v, with
// DisallowUnknownFields as a second line. Interface targets decode numbers
// as json.Number. Because null is refused, writers of these documents mark
// optional lists and maps omitempty (a nil slice marshals as null).
func DecodeStrict(data []byte, v any, maxBytes int) error {
	if len(data) > maxBytes {
		return &DecodeError{Msg: fmt.Sprintf("document is %d bytes, limit is %d", len(data), maxBytes), Err: ErrTooLarge}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("decode strict: target must be a non-nil pointer, got %T", v)
	}
	if !utf8.Valid(data) {
		return malformed("", "document is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec}
	if err := w.value(rv.Type().Elem(), "", 0); err != nil {
		return err
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return malformed("", "trailing data after the document: "+err.Error())
		}
		return malformed("", fmt.Sprintf("trailing data after the document: %v", tok))
	}
	if err := DecodeChecked(data, v); err != nil {
		return &DecodeError{Msg: "decode: " + err.Error(), Err: ErrMalformed}
	}
	return nil
}

// DecodeChecked is DecodeStrict's last step alone: the decode into v
// (numbers kept as json.Number, unknown fields refused), without the token
// walk and its checks. Only for bytes known to have passed DecodeStrict.
func DecodeChecked(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func malformed(path, msg string) error {
	return &DecodeError{Path: path, Msg: msg, Err: ErrMalformed}
}

// joinKey appends an object key to a JSON path: plain if it is a simple
// word, else quoted.
func joinKey(path, key string) string {
	simple := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			simple = false
			break
		}
	}
	if !simple {
		key = fmt.Sprintf("%q", key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
