package hostrun

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestShebang(t *testing.T) {
	for _, c := range []struct {
		in, interp, arg string
		ok, err         bool
	}{
		{in: "\x7fELF", ok: false},
		{in: "#!/bin/sh\necho", interp: "/bin/sh", ok: true},
		{in: "#! /bin/sh -e \n", interp: "/bin/sh", arg: "-e", ok: true},
		{in: "#!/usr/bin/env\tpython3 -u\n", interp: "/usr/bin/env", arg: "python3 -u", ok: true},
		{in: "#!\n", err: true},
		{in: "#!/bin/sh", interp: "/bin/sh", ok: true},
	} {
		f := tempFile(t, c.in)
		interp, arg, ok, err := shebang(f)
		if (err != nil) != c.err || ok != c.ok || interp != c.interp || arg != c.arg {
			t.Errorf("shebang(%q) = %q %q %v %v", c.in, interp, arg, ok, err)
		}
	}
}

func tempFile(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSealFixesBytes: the copy is what was hashed, and neither writes nor
// a rewrite of the source change it.
func TestSealFixesBytes(t *testing.T) {
	f := tempFile(t, "#!/bin/sh\necho one\n")
	s, err := seal(f, f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer s.File.Close()
	sum := sha256.Sum256([]byte("#!/bin/sh\necho one\n"))
	if s.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("hash %s", s.SHA256)
	}
	if err := os.WriteFile(f.Name(), []byte("#!/bin/sh\necho two\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.File.WriteAt([]byte("X"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("write to the sealed copy: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(int(s.File.Fd()), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("truncate the sealed copy: %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(s.File.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); !errors.Is(err, unix.EPERM) {
		t.Fatalf("add a seal: %v, want EPERM (F_SEAL_SEAL)", err)
	}
	b := make([]byte, 64)
	n, _ := s.File.ReadAt(b, 0)
	if string(b[:n]) != "#!/bin/sh\necho one\n" {
		t.Fatalf("the copy changed: %q", b[:n])
	}
}

// TestSealCommandScript: a script's interpreter is sealed too and its
// argv prefix is the #! line's.
func TestSealCommandScript(t *testing.T) {
	f := tempFile(t, "#!/bin/sh -e\ntrue\n")
	c, err := sealCommand(f, f.Name(), []string{"PATH=/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Interp == nil || c.Interp.Path != "/bin/sh" || len(c.InterpArgs) != 2 || c.InterpArgs[1] != "-e" {
		t.Fatalf("sealed command: %+v %+v", c.Interp, c.InterpArgs)
	}
	nested := tempFile(t, "#!"+f.Name()+"\n")
	if _, err := sealCommand(nested, nested.Name(), nil); !errors.Is(err, errNestedInterpreter) {
		t.Fatalf("nested interpreter: %v", err)
	}
	rel := tempFile(t, "#!sh\n")
	if _, err := sealCommand(rel, rel.Name(), nil); err == nil {
		t.Fatal("a relative interpreter was accepted")
	}
}
