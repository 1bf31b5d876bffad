package gate

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/walk"
	"golang.org/x/sys/unix"
)

// patchProduct is a workspace_patch: every add, change and deletion below
// the workspace (exclusions and mount stubs aside) written to one staged
// file, StagingDir/<slot>, in the PatchFormat below. The slot names the
// staged file; the patch always covers the whole workspace.
//
// PatchFormat ("gensee.patch/v1"): JSON lines, one object per operation, in
// walk order (depth-first, siblings sorted bytewise; a directory before its
// contents; a "delete" before the "add" that replaces the same path). Keys
// appear in this fixed order and are omitted when not applicable:
//
//	{"op":"delete","path":"old.txt"}
//	{"op":"add","path":"src","type":"dir","mode":"0755"}
//	{"op":"modify","path":"src/main.go","type":"file","mode":"0644","size":12,"content":"<base64>","sha256":"<hex>"}
//	{"op":"add","path":"ln","type":"symlink","mode":"0777","target":"main.go"}
//
// op is add, modify or delete (a replaced entry is a delete then an add);
// path is workspace-relative ("." is the workspace itself); content is the
// whole file in standard base64 and sha256 the hex digest of the decoded
// bytes; mode is the original permission bits. Applying the lines in order to
// the image's workspace yields the task's workspace. Bounds: max_entries
// caps the lines, max_bytes the sum of file sizes (so the file is at most
// about 4/3 max_bytes plus the metadata), max_depth the nesting below the
// workspace. Symlinks need allow_symlinks; special files, hardlinks and bad
// names fail the patch. Bind layout cannot see deletions or tell add from
// modify: every fresh entry is an add.
type patchProduct struct {
	*product
	staged bool
	file   *stagedFile
	w      *bufio.Writer
	sum    hash.Hash // over the patch file's bytes
}

func (p *patchProduct) begin(g *gater) error {
	dirfd, err := g.env.stage.parentOf(p.slot)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	f, err := create(dirfd, path.Base(p.slot), 0o644)
	if err != nil {
		return err
	}
	p.staged, p.file, p.sum = true, f, sha256.New()
	p.w = bufio.NewWriterSize(io.MultiWriter(f, p.sum), 256<<10)
	return nil
}

// root is the workspace directory itself (never the rootfs root).
func (p *patchProduct) root(g *gater, v *visit) (bool, error) {
	e := v.e
	ws := *v
	ws.path = "."
	v = &ws
	switch {
	case e.Kind == walk.KindWhiteout:
		if v.ch == chDelete {
			return false, p.line(Entry{Op: "delete", Path: "."}, nil)
		}
	case e.Kind == walk.KindSymlink:
		p.violate(RuleSymlink, ".", "the workspace is a symlink in the upper layer; not followed")
	case e.Kind != walk.KindDir:
		p.violate(RuleWrongType, ".", fmt.Sprintf("the workspace is a %s", e.Kind))
	case v.ch == chReplace:
		return true, p.dir(v, "add")
	default:
		return true, nil
	}
	return false, nil
}

func (p *patchProduct) child(g *gater, v *visit) (bool, error) {
	e := v.e
	if why := badName(g, e.Name); why != "" {
		p.violate(RuleBadName, v.path, why)
		return false, nil
	}
	if depth := e.Depth - p.depth; depth > p.maxDepth {
		p.stop(RuleOverMaxDepth, v.path, fmt.Sprintf("depth %d exceeds max_depth %d", depth, p.maxDepth))
		return false, nil
	}
	isDir := e.Kind == walk.KindDir
	if v.ch == chNone {
		return isDir, nil
	}
	if p.entries++; p.entries > p.maxEntries {
		p.stop(RuleOverMaxEntries, v.path, fmt.Sprintf("more than max_entries %d changes", p.maxEntries))
		return false, nil
	}
	op := "add"
	if v.ch == chModify {
		op = "modify"
	}
	switch {
	case e.Kind == walk.KindWhiteout:
		return false, p.line(Entry{Op: "delete", Path: v.path}, nil)
	case isDir:
		return true, p.dir(v, op)
	case e.Kind == walk.KindFile:
		return false, p.fileLine(g, v, op)
	case e.Kind == walk.KindSymlink:
		return false, p.symlink(v, op)
	}
	p.violate(RuleSpecialFile, v.path, fmt.Sprintf("a %s in the workspace; never opened", e.Kind))
	return false, nil
}

func (p *patchProduct) dir(v *visit, op string) error {
	if err := p.replaced(v); err != nil {
		return err
	}
	return p.line(Entry{Op: op, Path: v.path, Type: "dir", Mode: modeString(v.e.Stat.Perm())}, nil)
}

// replaced writes the delete that precedes an add over a replaced entry.
func (p *patchProduct) replaced(v *visit) error {
	if v.ch != chReplace {
		return nil
	}
	return p.line(Entry{Op: "delete", Path: v.path}, nil)
}

func (p *patchProduct) symlink(v *visit, op string) error {
	if !p.decl.AllowSymlinks {
		p.violate(RuleSymlink, v.path, "symlinks are not allowed in this patch (allow_symlinks is false); never followed")
		return nil
	}
	target, err := v.e.Readlink()
	if err != nil {
		p.violate(RuleUnreadable, v.path, err.Error())
		return nil
	}
	if why := badTarget(target); why != "" {
		p.violate(RuleBadName, v.path, why)
		return nil
	}
	if err := p.replaced(v); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(target))
	return p.line(Entry{Op: op, Path: v.path, Type: "symlink", Mode: modeString(v.e.Stat.Perm()),
		Size: int64(len(target)), SHA256: hex.EncodeToString(sum[:]), Target: target}, nil)
}

func (p *patchProduct) fileLine(g *gater, v *visit, op string) error {
	if !p.fileOK(v.e, v.path) || p.failed {
		return nil
	}
	if err := p.replaced(v); err != nil {
		return err
	}
	e := Entry{Op: op, Path: v.path, Type: "file", Mode: modeString(v.e.Stat.Perm()), Size: v.e.Stat.Size}
	return p.line(e, func() (string, bool, error) {
		enc := base64.NewEncoder(base64.StdEncoding, p.w)
		sum, ok, err := p.copyFile(g, v.e, v.path, enc)
		if cerr := enc.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write patch: %w", cerr)
		}
		return sum, ok, err
	})
}

// line writes one JSON line; content, when given, streams the file's base64
// between the "content" key and the "sha256" it returns. Nothing is written
// once the patch failed (it will be removed).
func (p *patchProduct) line(e Entry, content func() (string, bool, error)) error {
	if p.failed {
		return nil
	}
	var b strings.Builder
	b.WriteString(`{"op":` + quote(e.Op) + `,"path":` + quote(e.Path))
	if e.Type != "" {
		b.WriteString(`,"type":` + quote(e.Type) + `,"mode":` + quote(e.Mode))
	}
	if e.Type == "file" {
		b.WriteString(`,"size":` + strconv.FormatInt(e.Size, 10) + `,"content":"`)
	}
	if e.Target != "" {
		b.WriteString(`,"target":` + quote(e.Target))
	}
	if _, err := p.w.WriteString(b.String()); err != nil {
		return fmt.Errorf("write patch: %w", err)
	}
	if content != nil {
		sum, ok, err := content()
		if err != nil || !ok {
			return err
		}
		e.SHA256 = sum
		if _, err := p.w.WriteString(`","sha256":"` + sum + `"`); err != nil {
			return fmt.Errorf("write patch: %w", err)
		}
	}
	if _, err := p.w.WriteString("}\n"); err != nil {
		return fmt.Errorf("write patch: %w", err)
	}
	p.res.Entries = append(p.res.Entries, e)
	return nil
}

// quote JSON-encodes a string; names and targets reaching it are valid UTF-8.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (p *patchProduct) finish(g *gater) error {
	if p.file != nil {
		err := p.w.Flush()
		if cerr := p.file.Close(); err == nil {
			err = cerr
		}
		p.file = nil
		if err != nil {
			return fmt.Errorf("write patch %s: %w", p.slot, err)
		}
	}
	if !p.failed {
		p.res.SHA256 = hex.EncodeToString(p.sum.Sum(nil))
		p.res.Bytes = p.bytes
	}
	return p.settle(g, p.staged)
}

func (p *patchProduct) abort(g *gater) {
	if p.file != nil {
		p.file.Close()
		p.file = nil
	}
	if p.staged {
		g.env.stage.remove(p.slot)
	}
}
