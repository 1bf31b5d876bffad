package spec

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, in, path, msg string // path and msg: "" means accepted
	}{
		{name: "ok", in: `{"id":"a","version":1,"network":{"mode":"deny_all"}}`},
		{name: "ok whitespace", in: " {\"id\":\"a\",\"network\":{\"mode\":\"deny_all\"}}\n"},
		{name: "duplicate top", in: `{"id":"a","id":"b"}`, path: "id", msg: "duplicate key"},
		{name: "duplicate nested", in: `{"network":{"allow":[{"ip":"1.2.3.4","ip":"5.6.7.8"}]}}`, path: "network.allow[0].ip", msg: "duplicate key"},
		{name: "case only", in: `{"ID":"a"}`, path: "ID", msg: `did you mean "id"`},
		{name: "case only nested", in: `{"network":{"Mode":"deny_all"}}`, path: "network.Mode", msg: "case-sensitive"},
		{name: "unicode fold", in: `{"network":{"modſ":"x"}}`, path: `network."modſ"`, msg: "unknown field"},
		{name: "unknown", in: `{"idx":"a"}`, path: "idx", msg: "unknown field"},
		{name: "trailing", in: `{"id":"a"} {}`, msg: "trailing data"},
		{name: "trailing garbage", in: `{"id":"a"}x`, msg: "trailing data"},
		{name: "float", in: `{"version":1.0}`, path: "version", msg: "not an integer"},
		{name: "exponent", in: `{"version":1e3}`, path: "version", msg: "not an integer"},
		{name: "overflow", in: `{"network":{"allow":[{"port":99999999999999999999}]}}`, path: "network.allow[0].port", msg: "out of range"},
		{name: "null object", in: `{"network":null}`, path: "network", msg: "null"},
		{name: "null string", in: `{"id":null}`, path: "id", msg: "null"},
		{name: "null document", in: `null`, msg: "null"},
		{name: "wrong type", in: `{"id":1}`, path: "id", msg: "expected string"},
		{name: "array for object", in: `{"network":[]}`, path: "network", msg: "expected object"},
		{name: "bad utf8", in: "{\"id\":\"\xff\"}", msg: "UTF-8"},
		{name: "syntax", in: `{"id":}`, path: "id", msg: "syntax"},
		{name: "empty", in: ``, msg: "empty document"},
		{name: "blank", in: " \n", msg: "empty document"},
		{name: "truncated", in: `{"id":"a"`, msg: "unexpected end"},
		{name: "truncated value", in: `{"id":`, path: "id", msg: "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Contract
			err := DecodeStrict([]byte(tt.in), &c, 1024)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("DecodeStrict: %v", err)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want DecodeError wrapping ErrMalformed", err)
			}
			if de.Path != tt.path || !strings.Contains(de.Msg, tt.msg) {
				t.Fatalf("err = path %q msg %q, want path %q msg containing %q", de.Path, de.Msg, tt.path, tt.msg)
			}
		})
	}
}

func TestDecodeStrictSizeAndTarget(t *testing.T) {
	var c Contract
	if err := DecodeStrict([]byte(`{"id":"a"}`), &c, 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: err = %v, want ErrTooLarge", err)
	}
	if err := DecodeStrict([]byte(`{}`), c, 100); err == nil {
		t.Fatal("non-pointer target accepted")
	}
}

func TestDecodeStrictDepth(t *testing.T) {
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	var v any
	if err := DecodeStrict([]byte(deep), &v, 1000); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("err = %v, want depth error", err)
	}
}

func TestDecodeStrictAny(t *testing.T) {
	var v any
	if err := DecodeStrict([]byte(`{"a":{"b":1,"b":2}}`), &v, 100); err == nil || !strings.Contains(err.Error(), "a.b: duplicate key") {
		t.Fatalf("err = %v, want duplicate a.b", err)
	}
	if err := DecodeStrict([]byte(`{"a":[1.5,null,true,"x"]}`), &v, 100); err != nil {
		t.Fatalf("any: %v", err)
	}
}

func TestDecodeStrictTime(t *testing.T) {
	var in Inference
	err := DecodeStrict([]byte(`{"issued_at":5}`), &in, 100)
	if err == nil || !strings.Contains(err.Error(), "issued_at: expected string") {
		t.Fatalf("err = %v", err)
	}
	if err := DecodeStrict([]byte(`{"issued_at":"2026-01-01T00:00:00Z"}`), &in, 100); err != nil {
		t.Fatal(err)
	}
	if err := DecodeStrict([]byte(`{"issued_at":"yesterday"}`), &in, 100); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), `issued_at: "yesterday" is not an RFC 3339 time`) {
		t.Fatalf("bad time: err = %v", err)
	}
}

func TestDecodeStrictUnsigned(t *testing.T) {
	var o Observation
	for _, in := range []string{`{"uid":-1}`, `{"uid":4294967296}`} {
		if err := DecodeStrict([]byte(in), &o, 100); err == nil || !strings.Contains(err.Error(), "uid: ") {
			t.Errorf("%s: err = %v, want uid range error", in, err)
		}
	}
}
