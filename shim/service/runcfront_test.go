package service

import (
	"os"
	"path/filepath"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"

	"github.com/gensee/gensee/shim/runcfront"
)

// TestHandRunc: with a front, the inner task service gets the bundle's
// link as its runc, to the admitted runc for the create and to the front
// after it (toFront), and the bundle names the admitted runc for the
// front; in a bundle whose directories others may write, or without a
// front, the real runc itself, which toFront leaves alone.
func TestHandRunc(t *testing.T) {
	s := &service{}
	s.front.once.Do(func() { s.front.path = "/opt/gensee/bin/gensee-runc" })
	admitted := &runcoptions.Options{BinaryName: "/bin/true", Root: "/run/gensee-runc"}

	bundle := t.TempDir()
	h, err := s.handRunc(bundle, admitted, "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(bundle, runcLink)
	if h.BinaryName != link || h.Root != admitted.Root || admitted.BinaryName != "/bin/true" {
		t.Errorf("handed %+v (admitted %+v)", h, admitted)
	}
	if to, err := os.Readlink(link); err != nil || to != "/bin/true" {
		t.Errorf("the create's runc is %q, %v", to, err)
	}
	if err := s.toFront(bundle, h); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(link); err != nil || to != "/opt/gensee/bin/gensee-runc" {
		t.Errorf("after the create, the runc is %q, %v", to, err)
	}
	b, err := os.ReadFile(filepath.Join(bundle, runcfront.RuncFile))
	if err != nil || string(b) != "/bin/true\n" {
		t.Errorf("bundle names %q, %v", b, err)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if h, err := s.handRunc(open, admitted, "/bin/true"); err != nil || h.BinaryName != "/bin/true" {
		t.Errorf("untrusted bundle: handed %+v, %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(open, runcfront.RuncFile)); err == nil {
		t.Error("untrusted bundle: the runc file was written")
	}
	// A link planted there is left alone: only the one handRunc made is
	// re-pointed.
	planted := filepath.Join(open, runcLink)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(planted); err == nil {
		t.Error("untrusted bundle: a runc link was made")
	}
	must(os.Symlink("/planted", planted))
	must(s.toFront(open, admitted))
	if to, _ := os.Readlink(planted); to != "/planted" {
		t.Errorf("untrusted bundle: a planted link was re-pointed to %q", to)
	}

	none := &service{}
	none.front.once.Do(func() {})
	if h, err := none.handRunc(t.TempDir(), admitted, "/bin/true"); err != nil || h != admitted {
		t.Errorf("no front: handed %+v, %v", h, err)
	}
}
