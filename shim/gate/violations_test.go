package gate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// TestBindViolations covers the rules that need no root and no overlay.
func TestBindViolations(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, root string)
		prod  spec.Product
		rule  string
	}{
		{"missing", func(*testing.T, string) {}, spec.Product{Class: spec.ClassBlob, Slot: "out/a"}, RuleMissing},
		{"wrong_type", func(t *testing.T, r string) { mkdirAll(t, r, "ws/out/a") }, spec.Product{Class: spec.ClassBlob, Slot: "out/a"}, RuleWrongType},
		{"dir_wanted", func(t *testing.T, r string) { writeFile(t, r, "ws/out/a", "x", 0o644) }, spec.Product{Class: spec.ClassDirectoryTree, Slot: "out/a"}, RuleWrongType},
		{"over_max_bytes", func(t *testing.T, r string) { writeFile(t, r, "ws/a", "0123456789", 0o644) }, spec.Product{Class: spec.ClassBlob, Slot: "a", MaxBytes: 9}, RuleOverMaxBytes},
		{"tree_over_max_bytes", func(t *testing.T, r string) {
			writeFile(t, r, "ws/d/a", "01234", 0o644)
			writeFile(t, r, "ws/d/b", "01234", 0o644)
		}, spec.Product{Class: spec.ClassDirectoryTree, Slot: "d", MaxBytes: 9}, RuleOverMaxBytes},
		{"over_max_entries", func(t *testing.T, r string) {
			for _, n := range []string{"a", "b", "c"} {
				writeFile(t, r, "ws/d/"+n, n, 0o644)
			}
		}, spec.Product{Class: spec.ClassBlobSet, Slot: "d", MaxEntries: 2}, RuleOverMaxEntries},
		{"over_max_depth", func(t *testing.T, r string) { writeFile(t, r, "ws/d/1/2/3/f", "x", 0o644) }, spec.Product{Class: spec.ClassDirectoryTree, Slot: "d", MaxDepth: 3}, RuleOverMaxDepth},
		{"subdirectory", func(t *testing.T, r string) { writeFile(t, r, "ws/d/sub/f", "x", 0o644) }, spec.Product{Class: spec.ClassBlobSet, Slot: "d"}, RuleSubdirectory},
		{"bad_mode", func(t *testing.T, r string) { writeFile(t, r, "ws/a", "x", 0o666) }, spec.Product{Class: spec.ClassBlob, Slot: "a", Modes: []string{"0644"}}, RuleBadMode},
		{"symlink_slot", func(t *testing.T, r string) {
			mkdirAll(t, r, "ws")
			os.Symlink("/etc/passwd", filepath.Join(r, "ws/a"))
		}, spec.Product{Class: spec.ClassBlob, Slot: "a"}, RuleSymlink},
		{"symlink_ancestor", func(t *testing.T, r string) {
			writeFile(t, r, "elsewhere/a", "x", 0o644)
			mkdirAll(t, r, "ws")
			os.Symlink("../elsewhere", filepath.Join(r, "ws/out"))
		}, spec.Product{Class: spec.ClassBlob, Slot: "out/a"}, RuleSymlink},
		{"symlink_in_tree", func(t *testing.T, r string) {
			mkdirAll(t, r, "ws/d")
			os.Symlink("/etc", filepath.Join(r, "ws/d/l"))
		}, spec.Product{Class: spec.ClassDirectoryTree, Slot: "d"}, RuleSymlink},
		{"fifo", func(t *testing.T, r string) { mkdirAll(t, r, "ws"); unix.Mkfifo(filepath.Join(r, "ws/a"), 0o644) }, spec.Product{Class: spec.ClassBlob, Slot: "a"}, RuleSpecialFile},
		{"hardlink", func(t *testing.T, r string) {
			p := writeFile(t, r, "ws/a", "x", 0o644)
			os.Link(p, filepath.Join(r, "other"))
		}, spec.Product{Class: spec.ClassBlob, Slot: "a"}, RuleHardlink},
		{"bad_name_newline", func(t *testing.T, r string) { writeFile(t, r, "ws/d/a\nb", "x", 0o644) }, spec.Product{Class: spec.ClassDirectoryTree, Slot: "d"}, RuleBadName},
		{"bad_name_utf8", func(t *testing.T, r string) { writeFile(t, r, "ws/d/\xff\xfe", "x", 0o644) }, spec.Product{Class: spec.ClassBlobSet, Slot: "d"}, RuleBadName},
		{"bad_name_dots", func(t *testing.T, r string) { writeFile(t, r, "ws/d/...", "x", 0o644) }, spec.Product{Class: spec.ClassDirectoryTree, Slot: "d"}, RuleBadName},
		{"patch_bad_name", func(t *testing.T, r string) { writeFile(t, r, "ws/x\ny", "x", 0o644) }, spec.Product{Class: spec.ClassWorkspacePatch, Slot: "p"}, RuleBadName},
		{"invalid_json", func(t *testing.T, r string) { writeFile(t, r, "ws/r.json", `{"a":1} x`, 0o644) }, spec.Product{Class: spec.ClassStructuredResult, Slot: "r.json"}, RuleInvalidJSON},
		{"duplicate_key", func(t *testing.T, r string) { writeFile(t, r, "ws/r.json", `{"a":1,"b":{"c":1,"c":2}}`, 0o644) }, spec.Product{Class: spec.ClassStructuredResult, Slot: "r.json"}, RuleDuplicateKey},
		{"env_bad_key", func(t *testing.T, r string) { writeFile(t, r, "ws/env", "1A=x\n", 0o644) }, spec.Product{Class: spec.ClassEnvironmentSnapshot, Slot: "env"}, RuleBadEnvKey},
		{"env_duplicate", func(t *testing.T, r string) { writeFile(t, r, "ws/env", "A=1\nA=2\n", 0o644) }, spec.Product{Class: spec.ClassEnvironmentSnapshot, Slot: "env"}, RuleDuplicateKey},
		{"bad_slot", func(*testing.T, string) {}, spec.Product{Class: spec.ClassBlob, Slot: "../etc/passwd"}, RuleBadSlot},
		{"unknown_class", func(*testing.T, string) {}, spec.Product{Class: "tarball", Slot: "a"}, RuleUnknownClass},
		{"bad_contract", func(*testing.T, string) {}, spec.Product{Class: spec.ClassBlob, Slot: "a", Modes: []string{"rw-r--r--"}}, RuleBadContract},
		{"excluded_slot", func(t *testing.T, r string) { writeFile(t, r, "ws/target/app", "x", 0o644) }, spec.Product{Class: spec.ClassBlob, Slot: "target/app"}, RuleExcluded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			start := time.Now()
			c.setup(t, root)
			in := bindInput(t, root, start, c.prod)
			res := runGate(t, in)
			requireRule(t, res, c.prod.Slot, c.rule)
			stagedEmpty(t, in.StagingDir)
		})
	}
}

func TestBindPartialWhenOlderThanStart(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "ws/a", "from the image", 0o644)
	res := runGate(t, bindInput(t, root, time.Now().Add(time.Hour), spec.Product{Class: spec.ClassBlob, Slot: "a"}))
	requireRule(t, res, "a", RulePartial)
}

func TestOverlappingSlots(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/out/a", "x", 0o644)
	res := runGate(t, bindInput(t, root, start,
		spec.Product{Class: spec.ClassDirectoryTree, Slot: "out"},
		spec.Product{Class: spec.ClassBlob, Slot: "out/a"}))
	requireRule(t, res, "out", RuleOverlappingSlot)
	requireRule(t, res, "out/a", RuleOverlappingSlot)
}

func TestSetuidStrippedWhenStaged(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/tool", "#!/bin/true", 0o755)
	if err := os.Chmod(filepath.Join(root, "ws/tool"), 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(filepath.Join(root, "ws/tool"), 0o4755); err != nil {
		t.Fatal(err)
	}
	res := runGate(t, bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "tool"}))
	p := requirePass(t, res, "tool")
	if p.Entries[0].Mode != "4755" {
		t.Errorf("recorded mode %s, want the original 4755", p.Entries[0].Mode)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p.Staged, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o755 {
		t.Errorf("staged mode %o, want 0755 without setuid", st.Mode&0o7777)
	}
}

func TestMountStubsAreNotChanges(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	mkdirAll(t, root, "run/secrets")
	mkdirAll(t, root, "etc")
	writeFile(t, root, "etc/resolv.conf", "", 0o644)
	writeFile(t, root, "ws/a", "x", 0o644)
	in := bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "a"})
	in.ExcludeMounts = []string{"/run", "/etc/resolv.conf", "/proc"}
	res := runGate(t, in)
	requirePass(t, res, "a")
	if res.Unclaimed.Count != 0 || res.Excluded.MountStubs != 2 {
		t.Fatalf("unclaimed %+v excluded %+v", res.Unclaimed, res.Excluded)
	}
	in = bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "a"})
	in.ExcludeMounts = []string{"/ws"}
	requireRule(t, runGate(t, in), "a", RuleUnderMount)
}

func TestRunHonoursCancellation(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/a", "x", 0o644)
	in := bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "a"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a canceled context: %v", err)
	}
	stagedEmpty(t, in.StagingDir)
}

// TestRunTimeBound reads a large (sparse) file under a generous cap with a
// short deadline: the copy must stop at the deadline, not at EOF.
func TestRunTimeBound(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	p := writeFile(t, root, "ws/big", "", 0o644)
	if err := os.Truncate(p, 8<<30); err != nil {
		t.Fatal(err)
	}
	in := bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "big", MaxBytes: 16 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := Run(ctx, in)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run past its deadline: %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("Run took %v after a 200ms deadline", d)
	}
	stagedEmpty(t, in.StagingDir)
}

func TestInputErrors(t *testing.T) {
	dir := t.TempDir()
	ok := Input{RootDir: dir, StagingDir: filepath.Join(dir, "s"), StartTime: time.Now()}
	cases := map[string]func(in *Input){
		"no root":       func(in *Input) { in.RootDir = "" },
		"both":          func(in *Input) { in.UpperDir = dir },
		"no start":      func(in *Input) { in.StartTime = time.Time{} },
		"relative":      func(in *Input) { in.StagingDir = "staged" },
		"workspace":     func(in *Input) { in.Workspace = "ws/../x" },
		"exclusion":     func(in *Input) { in.Exclusions = []string{"a/b"} },
		"bind lowers":   func(in *Input) { in.LowerDirs = []string{dir} },
		"upper alone":   func(in *Input) { in.RootDir, in.UpperDir = "", dir },
		"missing root":  func(in *Input) { in.RootDir = filepath.Join(dir, "nope") },
		"mount not abs": func(in *Input) { in.ExcludeMounts = []string{"run"} },
	}
	for name, mutate := range cases {
		in := ok
		mutate(&in)
		if _, err := Run(context.Background(), in); err == nil {
			t.Errorf("%s: Run accepted bad input", name)
		}
	}
	if _, err := Run(context.Background(), ok); err != nil {
		t.Fatalf("baseline input: %v", err)
	}
}

func TestUnclaimedDigestIsStable(t *testing.T) {
	a := digestLines([]string{unclaimedLine("/b", chAdd), unclaimedLine("/a\n", chDelete)})
	b := digestLines([]string{unclaimedLine("/a\n", chDelete), unclaimedLine("/b", chAdd)})
	if a != b || !strings.HasPrefix(a, "sha256:") {
		t.Fatalf("digest depends on order: %s %s", a, b)
	}
}

func TestExistingStagedEntryIsAnError(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	writeFile(t, root, "ws/a", "x", 0o644)
	writeFile(t, root, "ws/b", "y", 0o644)
	in := bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "a"}, spec.Product{Class: spec.ClassBlob, Slot: "b"})
	writeFile(t, in.StagingDir, "b", "stale", 0o644)
	if _, err := Run(context.Background(), in); err == nil {
		t.Fatal("Run overwrote or ignored an existing staged entry")
	}
	if _, err := os.Stat(filepath.Join(in.StagingDir, "a")); !os.IsNotExist(err) {
		t.Fatalf("product a left staged after a failed run: %v", err)
	}
}

// TestLargeBlobStagedIntact stages a file big enough for the pipelined,
// O_DIRECT path, with an unaligned tail.
func TestLargeBlobStagedIntact(t *testing.T) {
	root := t.TempDir()
	start := time.Now()
	p := filepath.Join(root, "ws/big")
	writeRandom(t, p, pipelineAbove+chunkSize+123)
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	res := runGate(t, bindInput(t, root, start, spec.Product{Class: spec.ClassBlob, Slot: "big"}))
	pr := requirePass(t, res, "big")
	got, err := os.ReadFile(pr.Staged)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) || pr.SHA256 != sha(string(want)) {
		t.Fatalf("staged copy differs (%d vs %d bytes) or digest wrong", len(got), len(want))
	}
}
