package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// CanonicalJSON encodes v as canonical JSON: v is marshaled with
// encoding/json, then re-emitted with object keys sorted by their UTF-8
// bytes, no insignificant whitespace, no HTML escaping, and integers in
// plain decimal ("-0" becomes "0"). A number with a fraction or exponent
// anywhere is an error wrapping ErrFloat; duplicate keys (possible through
// json.RawMessage) wrap ErrMalformed. Strings keep encoding/json's escaping
// (control characters as \u00XX, U+2028/U+2029 escaped).
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := marshalNoHTML(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: marshal: %w", err)
	}
	var tree any
	if plainJSON(reflect.TypeOf(v)) {
		// encoding/json's own output for such a type has no duplicate
		// key and no depth DecodeStrict refuses: the plain decode gives
		// the very tree the strict one would, in a quarter of the time.
		err = DecodeChecked(raw, &tree)
	} else {
		err = DecodeStrict(raw, &tree, len(raw))
	}
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree, nil); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return buf.Bytes(), nil
}

// Digest returns "sha256:<lowercase hex>" over CanonicalJSON(v).
func Digest(v any) (string, error) {
	b, err := CanonicalJSON(v)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Digest returns the observation digest an inference must name.
func (o Observation) Digest() (string, error) { return Digest(o) }

func marshalNoHTML(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonPath is where writeCanonical is in the document, rendered only for
// an error: a key (key set) or an index under parent; nil is the root.
type canonPath struct {
	parent *canonPath
	key    string
	index  int
	isKey  bool
}

func (p *canonPath) String() string {
	if p == nil {
		return ""
	}
	if p.isKey {
		return joinKey(p.parent.String(), p.key)
	}
	return joinIndex(p.parent.String(), p.index)
}

func writeCanonical(buf *bytes.Buffer, v any, path *canonPath) error {
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
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			return fmt.Errorf("%s: %w: %s", pathOrRoot(path.String()), ErrFloat, s)
		}
		// An integer that fits in 64 bits prints as big.Int prints it
		// ("-0" as "0"); only a longer one needs big.Int.
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			buf.WriteString(strconv.FormatInt(n, 10))
			return nil
		}
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return fmt.Errorf("%s: %w: %s", pathOrRoot(path.String()), ErrMalformed, s)
		}
		buf.WriteString(n.String())
	case string:
		return writeString(buf, v)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e, &canonPath{parent: path, index: i}); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // Go string order is UTF-8 byte order
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeCanonical(buf, v[k], &canonPath{parent: path, key: k, isKey: true}); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("%s: %w: unexpected %T", pathOrRoot(path.String()), ErrMalformed, v)
	}
	return nil
}

// writeString writes s as encoding/json writes it without HTML escaping:
// quoted as it is when every byte is printable ASCII other than '"' and
// '\\' (nothing to escape), else through the encoder.
func writeString(buf *bytes.Buffer, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b, err := marshalNoHTML(s)
			if err != nil {
				return err
			}
			buf.Write(b)
			return nil
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}

func pathOrRoot(p string) string {
	if p == "" {
		return "(document)"
	}
	return p
}
