package hostrun

import (
	"slices"
	"testing"
)

func TestRunEnv(t *testing.T) {
	id := Identity{UID: 1000, Name: "alice", Home: "/home/alice"}
	got, err := RunEnv(id, []string{"CI=1", "LANG=en_US.UTF-8", "EMPTY="})
	want := []string{"PATH=" + FixedPath, "HOME=/home/alice", "LANG=en_US.UTF-8", "USER=alice", "CI=1", "EMPTY="}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("RunEnv = %q, %v; want %q", got, err, want)
	}
	if got, _ := RunEnv(Identity{UID: 42, Home: "/"}, nil); got[3] != "USER=42" {
		t.Errorf("nameless user: %q", got)
	}
	for _, bad := range [][]string{{"NOEQUALS"}, {"=v"}, {"1X=v"}, {"A-B=v"}, {"A=1", "A=2"}, {"A=x\x00y"}} {
		if _, err := RunEnv(id, bad); err == nil {
			t.Errorf("RunEnv(%q) accepted", bad)
		}
	}
}

func TestNewCommand(t *testing.T) {
	id := Identity{UID: 1000, GID: 1000, Name: "alice", Home: "/home/alice"}
	c, rf := NewCommand([]string{"make", "test"}, []string{"CI=1"}, "/src/proj", id)
	if rf != nil || c.Cwd != "/src/proj" || !slices.Equal(c.Args, []string{"make", "test"}) || c.Env[4] != "CI=1" {
		t.Fatalf("NewCommand = %+v, %v", c, rf)
	}
	cases := []struct {
		args   []string
		env    []string
		ws     string
		reason string
		field  string
	}{
		{nil, nil, "/w", ReasonCommand, "argv"},
		{[]string{""}, nil, "/w", ReasonCommand, "argv"},
		{[]string{"a\x00"}, nil, "/w", ReasonCommand, "argv"},
		{[]string{"true"}, []string{"bad"}, "/w", ReasonEnv, "--env"},
		{[]string{"true"}, nil, "", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "rel/dir", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "/w/../x", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "/w/", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "/", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "/a,upperdir=/x", ReasonWorkspace, "--workspace"},
		{[]string{"true"}, nil, "/a:b", ReasonWorkspace, "--workspace"},
	}
	for _, c := range cases {
		_, rf := NewCommand(c.args, c.env, c.ws, id)
		if rf == nil || rf.Reason != c.reason || rf.Field != c.field || rf.Message == "" {
			t.Errorf("NewCommand(%q, %q, %q) = %+v; want reason %s field %s", c.args, c.env, c.ws, rf, c.reason, c.field)
		}
	}
}

// TestCommandDigestReproducible: the same argv, env and workspace give the
// same observation's command digest whoever computes it.
func TestCommandDigestReproducible(t *testing.T) {
	id := Identity{UID: 1000, GID: 1000, Name: "alice", Home: "/home/alice"}
	a, _ := NewCommand([]string{"sh", "-c", "x"}, []string{"K=V"}, "/w", id)
	b, _ := NewCommand([]string{"sh", "-c", "x"}, []string{"K=V"}, "/w", id)
	if !slices.Equal(a.Env, b.Env) || a.Cwd != b.Cwd {
		t.Fatal("commands differ")
	}
}
