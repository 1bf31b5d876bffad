package spec

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sync"
	"time"
)

// plainTypes caches plainJSON's answer per type.
var plainTypes sync.Map // reflect.Type -> bool

// plainJSON reports whether encoding/json's output for every value of t
// is a document DecodeStrict accepts as it is: no object with a
// duplicate key, nested no deeper than maxDepth. It holds for booleans,
// numbers, strings, time.Time and text marshalers (all scalars), and for
// pointers, slices, arrays, maps with integer keys and structs made of
// such types, to a bounded depth. It does not for interfaces, a
// json.Marshaler (json.RawMessage among them: its bytes are anything), a
// map with string keys (invalid UTF-8 in two keys may give one key) or
// keys that marshal as text (two keys may give one text), or a type that
// contains itself.
func plainJSON(t reflect.Type) bool {
	if t == nil {
		return false
	}
	if v, ok := plainTypes.Load(t); ok {
		return v.(bool)
	}
	ok := plainDepth(t, 0, map[reflect.Type]bool{})
	plainTypes.Store(t, ok)
	return ok
}

func plainDepth(t reflect.Type, depth int, open map[reflect.Type]bool) bool {
	if depth > maxDepth/2 || open[t] {
		return false
	}
	if t == reflect.TypeFor[time.Time]() {
		return true
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()) {
		return false
	}
	if t.Implements(reflect.TypeFor[encoding.TextMarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		return true
	}
	open[t] = true
	defer delete(open, t)
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return plainDepth(t.Elem(), depth+1, open)
	case reflect.Map:
		// Integer keys only: encoding/json writes a string key's invalid
		// UTF-8 as U+FFFD, so two string keys may give one key, which the
		// strict decode refuses as a duplicate.
		switch t.Key().Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			return false
		}
		if t.Key().Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
			return false
		}
		return plainDepth(t.Elem(), depth+1, open)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			if f.Tag.Get("json") == "-" {
				continue
			}
			if !plainDepth(f.Type, depth+1, open) {
				return false
			}
		}
		return true
	}
	return false
}
