package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/internal/roottest"
	"golang.org/x/sys/unix"
)

// rootDir returns a fresh root-owned 0700 directory whose ancestors are all
// root-owned and not group/other-writable (under /run, not /tmp).
func rootDir(t *testing.T) string {
	t.Helper()
	roottest.Require(t)
	d, err := os.MkdirTemp("/run", "gensee-trust-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func newKeyHex(t *testing.T) (ed25519.PublicKey, string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, hex.EncodeToString(pub)
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask-proof
		t.Fatal(err)
	}
}

func TestLoadAnchorAccepts(t *testing.T) {
	dir := rootDir(t)
	pub, hx := newKeyHex(t)
	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"0400 with newline":    {hx + "\n", 0o400},
		"0600 without newline": {hx, 0o600},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "anchor.hex")
			os.Remove(p)
			writeFile(t, p, tc.content, tc.mode)
			got, err := LoadAnchor(p)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(pub) {
				t.Fatal("wrong key")
			}
		})
	}
}

func TestLoadAnchorRefuses(t *testing.T) {
	dir := rootDir(t)
	_, hx := newKeyHex(t)
	good := filepath.Join(dir, "good.hex")
	writeFile(t, good, hx+"\n", 0o400)

	cases := []struct {
		name  string
		setup func(p string) // creates whatever is at p
		rule  Rule
	}{
		{"missing", func(string) {}, RuleMissing},
		{"symlink", func(p string) { must(t, os.Symlink(good, p)) }, RuleSymlink},
		{"directory", func(p string) { must(t, os.Mkdir(p, 0o700)) }, RuleRegular},
		{"fifo", func(p string) { must(t, unix.Mkfifo(p, 0o400)) }, RuleRegular},
		{"not root-owned", func(p string) { writeFile(t, p, hx, 0o400); must(t, os.Chown(p, 1000, 1000)) }, RuleOwner},
		{"group readable", func(p string) { writeFile(t, p, hx, 0o440) }, RuleMode},
		{"world readable", func(p string) { writeFile(t, p, hx, 0o644) }, RuleMode},
		{"hard linked", func(p string) {
			writeFile(t, p+".other", hx, 0o400)
			must(t, os.Link(p+".other", p))
		}, RuleLinks},
		{"too large", func(p string) { writeFile(t, p, strings.Repeat("a", 300), 0o400) }, RuleSize},
		{"uppercase hex", func(p string) { writeFile(t, p, strings.ToUpper(hx), 0o400) }, RuleFormat},
		{"short", func(p string) { writeFile(t, p, hx[:62], 0o400) }, RuleFormat},
		{"two newlines", func(p string) { writeFile(t, p, hx+"\n\n", 0o400) }, RuleFormat},
		{"leading space", func(p string) { writeFile(t, p, " "+hx, 0o400) }, RuleFormat},
		{"empty", func(p string) { writeFile(t, p, "", 0o400) }, RuleFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			tc.setup(p)
			expectRule(t, p, tc.rule)
		})
	}
}

// TestLoadAnchorFifoDoesNotBlock: O_NONBLOCK keeps a fifo from hanging the shim.
func TestLoadAnchorFifoDoesNotBlock(t *testing.T) {
	p := filepath.Join(rootDir(t), "fifo")
	must(t, unix.Mkfifo(p, 0o400))
	done := make(chan error, 1)
	go func() { _, err := LoadAnchor(p); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("fifo accepted")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LoadAnchor blocked on a fifo")
	}
}

func TestLoadAnchorMessage(t *testing.T) {
	p := filepath.Join(rootDir(t), "catalog-root-public-key.hex")
	_, hx := newKeyHex(t)
	writeFile(t, p, hx, 0o644)
	_, err := LoadAnchor(p)
	want := "trust anchor " + p + ": mode 0644 allows group/other access; run: chmod 0400 " + p
	if err == nil || err.Error() != want {
		t.Fatalf("message:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrUntrustedAnchor) {
		t.Error("AnchorError does not match ErrUntrustedAnchor")
	}
}

func TestLoadAnchorParents(t *testing.T) {
	dir := rootDir(t)
	_, hx := newKeyHex(t)
	mk := func(sub string, mode os.FileMode, uid int) string {
		d := filepath.Join(dir, sub)
		must(t, os.Mkdir(d, mode))
		must(t, os.Chmod(d, mode))
		must(t, os.Chown(d, uid, 0))
		p := filepath.Join(d, "anchor.hex")
		writeFile(t, p, hx, 0o400)
		return p
	}
	expectRule(t, mk("group-writable", 0o770, 0), RuleParentMode)
	expectRule(t, mk("world-writable", 0o757, 0), RuleParentMode)
	expectRule(t, mk("sticky-shared", os.ModeSticky|0o777, 0), RuleParentMode)
	expectRule(t, mk("user-owned", 0o755, 1000), RuleParentOwner)

	real := mk("real", 0o755, 0)
	must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")))
	expectRule(t, filepath.Join(dir, "link", "anchor.hex"), RuleParentDir)
	expectRule(t, filepath.Join(real, "x"), RuleParentDir) // a file used as a directory
	expectRule(t, filepath.Join(dir, "absent", "anchor.hex"), RuleParentDir)
}

// TestLoadAnchorUnderTmp needs no root: /tmp is world-writable, so anything
// under it (t.TempDir) is refused before the file is even opened.
func TestLoadAnchorUnderTmp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "anchor.hex")
	_, hx := newKeyHex(t)
	writeFile(t, p, hx, 0o400)
	err := expectRule(t, p, RuleParentMode)
	if !strings.Contains(err.Error(), "/etc/gensee") {
		t.Errorf("fix does not point at a root-only directory: %v", err)
	}
}

func TestLoadAnchorRelative(t *testing.T) {
	expectRule(t, "etc/gensee/catalog-root-public-key.hex", RuleAbsolutePath)
}

func expectRule(t *testing.T, p string, rule Rule) *AnchorError {
	t.Helper()
	key, err := LoadAnchor(p)
	var ae *AnchorError
	if !errors.As(err, &ae) {
		t.Fatalf("LoadAnchor(%s) = %x, %v; want *AnchorError %s", p, key, err, rule)
	}
	if ae.Rule != rule || key != nil {
		t.Fatalf("LoadAnchor(%s): rule %s, want %s (%v)", p, ae.Rule, rule, err)
	}
	if !strings.Contains(err.Error(), p) {
		t.Errorf("message does not name the file: %v", err)
	}
	t.Logf("%s: %v", rule, err)
	return ae
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
