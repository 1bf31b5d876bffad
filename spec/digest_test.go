package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys", json.RawMessage(`{"b":1,"a":{"d":[1,2],"c":null}}`), `{"a":{"c":null,"d":[1,2]},"b":1}`},
		{"no html escaping", map[string]string{"k": "<a&b>"}, `{"k":"<a&b>"}`},
		{"whitespace dropped", json.RawMessage(" [ 1 , true , \"x\" ] "), `[1,true,"x"]`},
		{"negative zero", json.RawMessage(`-0`), `0`},
		{"big integer", json.RawMessage(`123456789012345678901234567890`), `123456789012345678901234567890`},
		{"utf8 byte order", map[string]int{"é": 1, "z": 2, "Z": 3}, `{"Z":3,"z":2,"é":1}`},
		{"struct", Candidate{Class: "build", ConfidenceBP: 9300}, `{"class":"build","confidence_bp":9300}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON(tt.in)
			if err != nil || string(got) != tt.want {
				t.Fatalf("CanonicalJSON = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	for name, in := range map[string]any{
		"float":           1.5,
		"nested float":    map[string]any{"a": []any{1, 2.25}},
		"raw float":       json.RawMessage(`{"a":1.0}`),
		"exponent":        json.RawMessage(`{"a":1e3}`),
		"huge float64":    1e21,
		"raw dup key":     json.RawMessage(`{"a":1,"a":2}`),
		"not marshalable": make(chan int),
	} {
		if _, err := CanonicalJSON(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := Digest(map[string]any{"x": 0.5})
	if !errors.Is(err, ErrFloat) || !strings.Contains(err.Error(), "x") {
		t.Fatalf("float error = %v, want ErrFloat naming x", err)
	}
}

func TestDigestKeyOrder(t *testing.T) {
	a, err := Digest(json.RawMessage(`{"uid":0,"schema":"s","gid":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest(json.RawMessage(`{"gid":1, "schema":"s", "uid":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(a, "sha256:") || len(a) != 71 {
		t.Fatalf("digests %s %s", a, b)
	}
}

func TestObservationDigest(t *testing.T) {
	o := Observation{Schema: SchemaObservation, ExecutableSHA256: strings.Repeat("a", 64), CommandDigest: "sha256:" + strings.Repeat("b", 64)}
	got, err := o.Digest()
	if err != nil {
		t.Fatal(err)
	}
	// Same document written with other key order and spacing.
	raw := `{ "uid":0, "gid":0, "command_digest":"sha256:` + strings.Repeat("b", 64) +
		`", "executable_sha256":"` + strings.Repeat("a", 64) + `", "schema":"gensee.observation/v1" }`
	want, err := Digest(json.RawMessage(raw))
	if err != nil || got != want {
		t.Fatalf("Observation.Digest = %s, Digest(raw) = %s, %v", got, want, err)
	}
	// Pin the value: a change here breaks every signed inference in the field.
	const pinned = "sha256:2dda5a977f195425e7f27cc024c29b4ac50bda18f986e85a1f5d2366faedf425"
	if got != pinned {
		t.Fatalf("pinned digest changed: %s", got)
	}
}

func TestCommandDigest(t *testing.T) {
	a, err := Command{Args: []string{"/bin/sh", "-c", "make <all>"}, Cwd: "/src"}.Digest()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Command{Args: []string{"/bin/sh", "-c", "make <all>"}, Env: []string{}, Cwd: "/src"}.Digest()
	if err != nil || a != b {
		t.Fatalf("nil and empty env digest differently: %s %s %v", a, b, err)
	}
	want, _ := Digest(json.RawMessage(`{"cwd":"/src","env":[],"args":["/bin/sh","-c","make <all>"]}`))
	if a != want {
		t.Fatalf("Command.Digest = %s, want %s", a, want)
	}
	c, _ := Command{Args: []string{"/bin/sh"}, Env: []string{"A=1"}, Cwd: "/src"}.Digest()
	if c == a {
		t.Fatal("different commands share a digest")
	}
}

// A command with a byte that is not UTF-8 has no digest: JSON would make
// it U+FFFD and so collide with the command that names U+FFFD itself.
func TestCommandDigestRefusesInvalidUTF8(t *testing.T) {
	good, err := Command{Args: []string{"cat", "/data/\ufffd"}}.Digest()
	if err != nil || good == "" {
		t.Fatalf("valid command: %q, %v", good, err)
	}
	for _, c := range []Command{
		{Args: []string{"cat", "/data/\xff"}},
		{Args: []string{"true"}, Env: []string{"X=\xfe"}},
		{Args: []string{"true"}, Cwd: "/w\xff"},
	} {
		if d, err := c.Digest(); !errors.Is(err, ErrMalformed) {
			t.Errorf("Digest(%q) = %q, %v; want ErrMalformed", c, d, err)
		}
	}
}
