package spec

import (
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// walker checks a JSON token stream against a Go type before encoding/json
// is allowed to see it. A nil type means "any JSON" (interface targets and
// types with their own UnmarshalJSON): only duplicates and depth are checked.
type walker struct {
	dec *json.Decoder
}

func (w *walker) value(t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return malformed(path, fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	tok, err := w.dec.Token()
	if err == io.EOF && depth == 0 {
		return malformed(path, "empty document")
	}
	if err != nil {
		return syntaxErr(path, err)
	}
	if tok == nil {
		if t == nil || t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
			return nil
		}
		return malformed(path, "null is not allowed here; expected "+describe(t))
	}
	orig := t
	t = target(t)
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && (t == nil || t.Kind() == reflect.Map || t.Kind() == reflect.Struct):
			return w.object(t, path, depth)
		case tok == '[' && (t == nil || t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			return w.array(t, path, depth)
		}
		return malformed(path, "expected "+describe(t)+", got "+map[json.Delim]string{'{': "object", '[': "array"}[tok])
	case string:
		if isTime(orig) {
			if _, err := time.Parse(time.RFC3339, tok); err != nil {
				return malformed(path, fmt.Sprintf("%q is not an RFC 3339 time such as \"2026-11-29T00:00:00Z\"", truncate(tok, 80)))
			}
			return nil
		}
		if t == nil || t.Kind() == reflect.String || isSliceOfBytes(t) {
			return nil
		}
		return malformed(path, "expected "+describe(t)+", got string")
	case bool:
		if t == nil || t.Kind() == reflect.Bool {
			return nil
		}
		return malformed(path, "expected "+describe(t)+", got boolean")
	case json.Number:
		return checkNumber(tok, t, path)
	}
	return malformed(path, fmt.Sprintf("unexpected token %v", tok))
}

// target strips pointers and maps types that decode themselves: time.Time
// and other text unmarshalers take a string, JSON unmarshalers take anything.
func target(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	pt := reflect.PointerTo(t)
	if t == reflect.TypeFor[time.Time]() {
		return reflect.TypeFor[string]()
	}
	if pt.Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	if pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return reflect.TypeFor[string]()
	}
	return t
}

func (w *walker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type // nil: any
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	} else if t != nil {
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return syntaxErr(path, err)
		}
		key, _ := tok.(string)
		kp := joinKey(path, key)
		if seen[key] {
			return malformed(kp, "duplicate key")
		}
		seen[key] = true
		ft := elem
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return malformed(kp, fmt.Sprintf("unknown field; keys are case-sensitive, did you mean %q?", name))
					}
				}
				return malformed(kp, "unknown field")
			}
		}
		if err := w.value(ft, kp, depth+1); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	if err != nil {
		return syntaxErr(path, err)
	}
	return nil
}

func (w *walker) array(t reflect.Type, path string, depth int) error {
	var elem reflect.Type
	if t != nil {
		elem = t.Elem()
	}
	n := 0
	for ; w.dec.More(); n++ {
		if t != nil && t.Kind() == reflect.Array && n >= t.Len() {
			return malformed(path, fmt.Sprintf("at most %d items", t.Len()))
		}
		if err := w.value(elem, joinIndex(path, n), depth+1); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // ']'
	if err != nil {
		return syntaxErr(path, err)
	}
	return nil
}

// checkNumber accepts n for t: any number for floats and untyped targets,
// plain in-range integers for integer kinds.
func checkNumber(n json.Number, t reflect.Type, path string) error {
	if t == nil {
		return nil
	}
	s := string(n)
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if strings.ContainsAny(s, ".eE") {
			return malformed(path, fmt.Sprintf("%s is not an integer", s))
		}
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || reflect.Zero(t).OverflowInt(i) {
			return malformed(path, fmt.Sprintf("%s is out of range for %s", s, describe(t)))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.ContainsAny(s, ".eE") {
			return malformed(path, fmt.Sprintf("%s is not an integer", s))
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || reflect.Zero(t).OverflowUint(u) {
			return malformed(path, fmt.Sprintf("%s is out of range for %s", s, describe(t)))
		}
		return nil
	}
	return malformed(path, "expected "+describe(t)+", got number")
}

// jsonFields maps the exact JSON names of t's fields to their types, the way
// encoding/json names them (tag name, else Go name; "-" skipped; untagged
// embedded structs flattened).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// syntaxErr reports a token error; the end of input mid-value is named as such.
func syntaxErr(path string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return malformed(path, "unexpected end of document")
	}
	return malformed(path, "syntax: "+err.Error())
}

// isTime reports whether t is time.Time or a pointer to it.
func isTime(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t == reflect.TypeFor[time.Time]()
}

func isSliceOfBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// describe names the JSON shape a Go type expects, for error messages.
func describe(t reflect.Type) string {
	t = target(t)
	if t == nil {
		return "any value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		if isSliceOfBytes(t) {
			return "base64 string"
		}
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.String()
}
