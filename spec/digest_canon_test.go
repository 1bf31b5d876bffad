package spec

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"testing"
)

// referenceCanonical is writeCanonical as first written: every string
// through encoding/json (no HTML escaping), every number through big.Int.
// writeCanonical's fast paths must give exactly its bytes: digests are
// signed (an inference names an observation's).
func referenceCanonical(buf *bytes.Buffer, v any) bool {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		n, ok := new(big.Int).SetString(string(v), 10)
		if !ok {
			return false
		}
		buf.WriteString(n.String())
	case string:
		b, err := marshalNoHTML(v)
		if err != nil {
			return false
		}
		buf.Write(b)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if !referenceCanonical(buf, e) {
				return false
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		var keys []string
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			referenceCanonical(buf, k)
			buf.WriteByte(':')
			if !referenceCanonical(buf, v[k]) {
				return false
			}
		}
		buf.WriteByte('}')
	default:
		return false
	}
	return true
}

func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null,"x"]}`,
		`{"ip":"198.18.0.1","proto":"tcp","port":443}`,
		`["a\"b","c\\d","\u0001","<>&","\u2028\u2029","é","\ud83d\ude00","tab\there","del\u007f"]`,
		`[-0,0,9223372036854775807,-9223372036854775808,9223372036854775808,-99999999999999999999999]`,
		`{"z":{"y":[[],{}]},"":"","\u00e9":"k"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var tree any
		if DecodeStrict(data, &tree, 1<<20) != nil {
			return
		}
		var ref bytes.Buffer
		if !referenceCanonical(&ref, tree) {
			return
		}
		var got bytes.Buffer
		if err := writeCanonical(&got, tree, nil); err != nil {
			if !bytes.ContainsAny(data, ".eE") {
				t.Fatalf("%q: writeCanonical: %v", data, err)
			}
			return
		}
		if !bytes.Equal(got.Bytes(), ref.Bytes()) {
			t.Fatalf("%q:\n got %s\nwant %s", data, got.Bytes(), ref.Bytes())
		}
	})
}
