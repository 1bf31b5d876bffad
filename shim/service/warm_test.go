package service

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestSkeletonReachesNestedTypes: a skeleton's encoding holds an object
// for the struct types nested deep in the bundle spec (so decoding it
// builds their caches), and every warm type encodes and decodes.
func TestSkeletonReachesNestedTypes(t *testing.T) {
	b, err := json.Marshal(skeleton(reflect.TypeFor[specs.Spec](), 0).Addr().Interface())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"seccomp":{`, `"syscalls":[{`, `"args":[{`, `"capabilities":{`, `"rlimits":[{`, `"uidMappings":[{`, `"devices":[{`, `"hooks":{`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("skeleton spec lacks %s: %s", key, b)
		}
	}
	for _, v := range warmTypes {
		typ := reflect.TypeOf(v).Elem()
		b, err := json.Marshal(skeleton(typ, 0).Addr().Interface())
		if err != nil {
			t.Errorf("%v: encode skeleton: %v", typ, err)
			continue
		}
		if len(b) < 3 {
			t.Errorf("%v: skeleton encodes to %s", typ, b)
		}
	}
	warmCodecs() // no panic on any of them
}
