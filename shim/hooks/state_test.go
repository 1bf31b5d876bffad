package hooks

import (
	"strings"
	"testing"
)

func TestReadState(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"id":"` + id + `","status":"creating","pid":42,"bundle":"/run/b/` + id + `/userdata"}`, true},
		{`{"id":"` + id + `","status":"stopped","bundle":"/run/b"}`, true},
		{`{"id":"` + id + `","status":"creating","bundle":"/run/b"}`, false},
		{`{"id":"../x","status":"stopped","bundle":"/run/b"}`, false},
		{`{"id":"x","status":"running","pid":1,"bundle":"/run/b"}`, false},
		{`{"id":"x","status":"stopped","bundle":"rel"}`, false},
		{`{"id":"x","status":"stopped","bundle":"/a/../b"}`, false},
		{`not json`, false},
	} {
		_, err := ReadState(strings.NewReader(c.in))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.in, err, c.ok)
		}
	}
}

func TestEngineOf(t *testing.T) {
	for _, c := range []struct {
		a    map[string]string
		want string
	}{
		{map[string]string{"io.container.manager": "libpod"}, "podman"},
		{map[string]string{"io.podman.annotations.autoremove": "FALSE"}, "podman"},
		{map[string]string{"io.kubernetes.cri-o.ContainerType": "container"}, "cri-o"},
		{map[string]string{"io.gensee.boundary.inference": "x"}, ""},
	} {
		if got := EngineOf(c.a); got != c.want {
			t.Errorf("%v: %q, want %q", c.a, got, c.want)
		}
	}
}

func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"id":"abc","status":"creating","pid":1,"bundle":"/b"}`))
	f.Add([]byte(`{"id":"abc","status":"stopped","bundle":"/b","annotations":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadState(strings.NewReader(string(b)))
		if err == nil && (s.Bundle == "" || s.ID == "" || strings.Contains(s.ID, "/")) {
			t.Fatalf("accepted %q", b)
		}
	})
}
