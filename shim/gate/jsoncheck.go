package gate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting in structured results.
const maxJSONDepth = 512

// errBadUTF8 is returned by utf8Reader on the first invalid sequence.
var errBadUTF8 = errors.New("not valid UTF-8")

// CheckJSON reads exactly one JSON value and reports the first problem, or
// nil: invalid UTF-8, a syntax error, trailing data, nesting deeper than 512
// (rule invalid_json) or an object repeating a key after unescaping (rule
// duplicate_key). encoding/json alone would keep the last duplicate and
// replace invalid UTF-8 silently; this checker does neither.
func CheckJSON(r io.Reader) *Violation {
	dec := json.NewDecoder(&utf8Reader{r: bufio.NewReaderSize(r, 64<<10)})
	dec.UseNumber()
	type frame struct {
		keys      map[string]bool // nil for arrays
		expectKey bool
	}
	var stack []*frame
	done := false
	valueDone := func() {
		if len(stack) == 0 {
			done = true
		} else if f := stack[len(stack)-1]; f.keys != nil {
			f.expectKey = true
		}
	}
	for !done {
		tok, err := dec.Token()
		if err != nil {
			return jsonViolation(err)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) == maxJSONDepth {
					return &Violation{Rule: RuleInvalidJSON, Detail: fmt.Sprintf("nesting deeper than %d", maxJSONDepth)}
				}
				f := &frame{}
				if t == '{' {
					f.keys, f.expectKey = map[string]bool{}, true
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if f := top(stack); f != nil && f.keys != nil && f.expectKey {
				if f.keys[t] {
					return &Violation{Rule: RuleDuplicateKey, Detail: fmt.Sprintf("object repeats key %q", t)}
				}
				f.keys[t], f.expectKey = true, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return &Violation{Rule: RuleInvalidJSON, Detail: "trailing data after the JSON value"}
		}
		return jsonViolation(err)
	}
	return nil
}

func top[T any](s []*T) *T {
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

func jsonViolation(err error) *Violation {
	if err == io.EOF {
		return &Violation{Rule: RuleInvalidJSON, Detail: "empty or truncated JSON"}
	}
	return &Violation{Rule: RuleInvalidJSON, Detail: err.Error()}
}

// utf8Reader fails on the first invalid UTF-8 sequence. A sequence split
// across reads is held back (at most 3 bytes) until it completes.
type utf8Reader struct {
	r    io.Reader
	tail []byte
	err  error
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if len(p) < 8 {
		return 0, io.ErrShortBuffer
	}
	n := copy(p, u.tail)
	m, err := u.r.Read(p[n:])
	n += m
	keep := 0
	if err == nil {
		keep = incompleteSuffix(p[:n])
	}
	if !utf8.Valid(p[:n-keep]) {
		u.err = errBadUTF8
		return 0, u.err
	}
	u.tail = append(u.tail[:0], p[n-keep:n]...)
	if err != nil && err != io.EOF {
		u.err = err
	}
	return n - keep, err
}

// incompleteSuffix returns how many trailing bytes of b start a UTF-8
// sequence that is not yet complete (0 to 3).
func incompleteSuffix(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}
