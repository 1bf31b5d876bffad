package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/internal/asuser"
	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hostrun"
	"github.com/gensee/gensee/spec"
)

var alice = hostrun.Identity{UID: 1000, GID: 1000, Name: "alice", Home: "/home/alice"}

// refusedWith checks err is a boundary run refusal (125) naming want.
func refusedWith(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != ExitRunRefused {
		t.Errorf("%s: %v, want a refusal (exit %d)", what, err, ExitRunRefused)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// TestCallerConfig: invoked by anyone but root, only the default operator
// config and its catalog are read.
func TestCallerConfig(t *testing.T) {
	env := func(kv map[string]string) *Env { return &Env{Getenv: func(k string) string { return kv[k] }} }
	root := hostrun.Identity{Home: "/"}
	cases := []struct {
		name     string
		invoking hostrun.Identity
		flag     string
		env      map[string]string
		field    string // "" = accepted
	}{
		{"root names any", root, "/srv/config.toml", nil, ""},
		{"user, default", alice, "", nil, ""},
		{"user names the default", alice, config.DefaultPath, nil, ""},
		{"user names another", alice, "/srv/config.toml", nil, "--config"},
		{"user's env names another", alice, "", map[string]string{config.EnvConfig: "/srv/config.toml"}, "$" + config.EnvConfig},
		{"user's env names the default", alice, "", map[string]string{config.EnvConfig: config.DefaultPath}, ""},
		{"user names a relative path elsewhere", alice, "../../etc/gensee/config.toml", nil, "--config"},
	}
	for _, c := range cases {
		o := runOptions{config: c.flag}
		err := o.checkCallerConfig(env(c.env), c.invoking)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		refusedWith(t, c.name, err, "admission refused: operator_config: "+c.field+": ", config.DefaultPath)
	}

	cfg := config.Config{Catalog: "/etc/gensee/catalog.signed.json"}
	for _, c := range []struct {
		invoking hostrun.Identity
		catalog  string
		ok       bool
	}{
		{root, "/srv/other.json", true},
		{alice, "", true},
		{alice, "/etc/gensee/catalog.signed.json", true},
		{alice, "/etc/gensee/./catalog.signed.json", true},
		{alice, "/srv/other.json", false},
	} {
		o := runOptions{catalog: c.catalog}
		err := o.checkCallerCatalog(c.invoking, cfg)
		if c.ok && err != nil {
			t.Errorf("catalog %s for uid %d: %v", c.catalog, c.invoking.UID, err)
		}
		if !c.ok {
			refusedWith(t, "catalog "+c.catalog, err, "admission refused: catalog: --catalog: ", cfg.Catalog)
		}
	}
}

// TestQuietRefusal: a refusal that may quote the unverified document is
// replaced by one naming the path and a generic reason.
func TestQuietRefusal(t *testing.T) {
	o := runOptions{observation: "/tmp/obs.json", inference: "/tmp/inf.json"}
	for _, rf := range []*spec.Refusal{
		{Reason: "inference_malformed", Field: "--inference", Message: `annotation x is not a strict DSSE envelope: unknown field "SECRET"`},
		{Reason: "unknown_analyzer", Field: "--inference", Message: `the inference names analyzer "SECRET"`},
		{Reason: "bad_signature", Field: "--inference", Message: `the inference naming analyzer "SECRET" is not signed`},
		{Reason: "preflight_mismatch", Field: "--observation", Message: `not a valid observation: invalid character 'S'... SECRET`},
	} {
		got := o.quiet(rf)
		if strings.Contains(got.Error(), "SECRET") || !strings.Contains(got.Error(), rf.Field+" /tmp/") || got.Reason != rf.Reason || got.Field != rf.Field {
			t.Errorf("quiet(%+v) = %+v", rf, got)
		}
	}
	keep := &spec.Refusal{Reason: "low_confidence", Field: "--inference", Message: "top class \"build\" at 10 bp"}
	if got := o.quiet(keep); got != keep {
		t.Errorf("a verified document's refusal was replaced: %+v", got)
	}
}

// TestReadAsNoContent: read failures name the path and why, never what
// the file holds.
func TestReadAsNoContent(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("SECRET", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	me := asuser.Creds{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), Groups: []uint32{uint32(os.Getegid())}}
	e := &Env{}
	for path, want := range map[string]string{big: "larger than any valid", link: "is a symlink", dir: "not a regular file", filepath.Join(dir, "none"): "no such file"} {
		_, err := e.readAs(me, "inference", path, 10)
		refusedWith(t, path, err, path, want)
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error echoes the content: %v", path, err)
		}
	}
	if data, err := e.readAs(me, "inference", big, 1000); err != nil || len(data) != 600 {
		t.Errorf("readAs = %d bytes, %v", len(data), err)
	}
}

// TestBoundaryRunRootRefused: invoked by root (this test's own ancestry),
// boundary run refuses without --user, and with --user root, whatever
// SUDO_UID says; nothing runs.
func TestBoundaryRunRootRefused(t *testing.T) {
	if id, err := hostrun.InvokingUser(nil); err != nil || id.UID != 0 {
		t.Skipf("the invoking user of this test is not root (%+v, %v)", id, err)
	}
	ws := t.TempDir()
	for _, env := range []map[string]string{nil, {"SUDO_UID": "0", "SUDO_GID": "0"}, {"SUDO_UID": "65534", "SUDO_GID": "65534"}} {
		h := std()
		h.env = env
		h.run(t, "boundary", "run", "--workspace", ws, "--", "touch", "ran").want(t, ExitRunRefused, nil, []string{"gensee: boundary run: admission refused: user: the invoking user is root", "--user NAME"})
		h.run(t, "boundary", "run", "--user", "root", "--workspace", ws, "--", "touch", "ran").want(t, ExitRunRefused, nil, []string{"gensee: boundary run: admission refused: user: --user root is uid 0"})
		h.run(t, "boundary", "run", "--user", "0", "--workspace", ws, "--", "touch", "ran").want(t, ExitRunRefused, nil, []string{"gensee: boundary run: admission refused: user: --user 0 is uid 0"})
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Fatalf("something ran: %v", ents)
	}
}
