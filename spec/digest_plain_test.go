package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// TestPlainJSON: the types digested on admission's path take the plain
// decode; a raw message, a marshaler, an interface, a text-keyed map or a
// type that contains itself does not.
func TestPlainJSON(t *testing.T) {
	type self struct{ Next *self }
	type raw struct{ R json.RawMessage }
	type iface struct{ V any }
	type textKeys struct{ M map[netip.Addr]int }
	type hidden struct {
		private json.RawMessage // unexported: encoding/json never writes it
		Shown   string
	}
	_ = hidden{private: nil}
	for _, c := range []struct {
		v    any
		want bool
	}{
		{Contract{}, true}, {Observation{}, true}, {Command{}, true}, {time.Time{}, true}, {netip.Addr{}, true},
		{hidden{}, true}, {map[int][]string{}, true}, {map[string][]int{}, false},
		{self{}, false}, {raw{}, false}, {iface{}, false}, {textKeys{}, false}, {json.RawMessage{}, false}, {AnalyzerAnswer{}, false},
	} {
		if got := plainJSON(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("plainJSON(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestCanonicalPlainMatchesStrict: for a plain type the plain decode gives
// the canonical bytes the strict decode gives.
func TestCanonicalPlainMatchesStrict(t *testing.T) {
	c := validContract()
	var rules []AllowRule
	for i := 0; i < 300; i++ {
		rules = append(rules, AllowRule{IP: fmt.Sprintf("198.18.%d.%d", i/256, i%256), Proto: "tcp", Port: 443})
	}
	c.Network = allowExact(rules...)
	for _, v := range []any{c, validContract(), Command{Args: []string{"/bin/sh", "-c", "é \"x\" <y>"}, Env: []string{"A=\u2028"}, Cwd: "/"}} {
		got, err := CanonicalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := marshalNoHTML(v)
		if err != nil {
			t.Fatal(err)
		}
		var tree any
		if err := DecodeStrict(raw, &tree, len(raw)); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := writeCanonical(&want, tree, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%T: plain and strict canonical forms differ", v)
		}
	}
}

// TestCanonicalStringKeysCollapse: two string keys that marshal as one
// (invalid UTF-8 becomes U+FFFD) are refused as a duplicate, as the strict
// decode always refused them, never digested as a third value's digest.
func TestCanonicalStringKeysCollapse(t *testing.T) {
	type withMap struct{ Routes map[string]string }
	a := withMap{Routes: map[string]string{"\xfe": "allow-net", "\xff": "offline"}}
	if _, err := CanonicalJSON(a); err == nil {
		t.Fatal("keys that marshal as one: digested")
	}
}
