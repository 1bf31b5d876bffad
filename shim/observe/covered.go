package observe

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gensee/gensee/internal/fsafe"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// CoveredError is a spec mount that hides the executable the observation
// hashed (or a directory on the way to it), so runc would exec other bytes.
type CoveredError struct {
	Mount      int    // index in the spec's mounts
	Dest       string // the mount's destination
	Executable string // the executable's path inside the rootfs, symlinks resolved
}

func (e *CoveredError) Error() string {
	return fmt.Sprintf("mounts[%d] at %s covers the entrypoint %s (or a directory runc searches for it): the observation would hash the image's file while runc executes the mount's", e.Mount, e.Dest, e.Executable)
}

// CheckMountsCover returns a *CoveredError when a mount of config lands on
// the executable process.args[0] resolves to inside rootfs, on one of its
// parent directories (after symlinks), or on a PATH directory runc would
// search before reaching it. Mount destinations are resolved inside the
// rootfs the way runc resolves them (symlinks stay inside the root).
func CheckMountsCover(rootfs string, config *specs.Spec) error {
	if config == nil || config.Process == nil || len(config.Process.Args) == 0 || len(config.Mounts) == 0 {
		return nil
	}
	root, err := os.OpenFile(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open rootfs: %w", err)
	}
	defer root.Close()
	p := config.Process
	exe, err := resolve(root, p.Args[0], cwdOf(p), pathOf(p.Env))
	if err != nil {
		return err
	}
	real, err := inRootPath(root, exe.f)
	if err != nil {
		exe.f.Close()
		return err
	}
	loaders := loadersOf(exe.f)
	exe.f.Close()
	// Paths whose being covered changes what runc executes: the file as
	// named and as resolved, and every PATH entry searched before it.
	paths := []string{path.Clean(exe.path), real}
	if !strings.Contains(p.Args[0], "/") {
		for _, dir := range filepath.SplitList(pathOf(p.Env)) {
			if !path.IsAbs(dir) {
				continue
			}
			cand := path.Join(dir, p.Args[0])
			paths = append(paths, cand)
			if cand == path.Clean(exe.path) {
				break
			}
		}
	}
	// What runs with it: its ELF interpreter or #! interpreter, and the
	// dynamic loader's configuration; library directories are trees: a
	// mount anywhere in them replaces what the executable loads.
	for _, l := range loaders {
		paths = append(paths, l)
		if lf, err := fsafe.OpenInRoot(root, l, unix.O_PATH); err == nil {
			if r, err := inRootPath(root, lf); err == nil {
				paths = append(paths, r) // /bin/sh -> /usr/bin/dash
			}
			lf.Close()
		}
	}
	paths = append(paths, "/etc/ld.so.preload", "/etc/ld.so.cache")
	trees := append(slices.Clone(libraryTrees), loaderEnvPaths(p.Env)...)
	for i, m := range config.Mounts {
		for _, d := range mountDests(root, m.Destination) {
			for _, q := range paths {
				if d == "/" || q == d || strings.HasPrefix(q, d+"/") {
					return &CoveredError{Mount: i, Dest: m.Destination, Executable: real}
				}
			}
			for _, lib := range trees {
				if d == lib || strings.HasPrefix(d, lib+"/") || strings.HasPrefix(lib, d+"/") {
					return &CoveredError{Mount: i, Dest: m.Destination, Executable: real}
				}
			}
		}
	}
	return nil
}

// loaderEnvPaths are the paths the dynamic loader takes from the
// environment (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT): a mount there
// replaces what the executable loads.
func loaderEnvPaths(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || (k != "LD_PRELOAD" && k != "LD_LIBRARY_PATH" && k != "LD_AUDIT") {
			continue
		}
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' }) {
			if path.IsAbs(p) {
				out = append(out, path.Clean(p))
			}
		}
	}
	return out
}

// libraryTrees are where the dynamic loader looks for libraries.
var libraryTrees = []string{"/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib"}

// loadersOf returns the interpreter f names: PT_INTERP of an ELF file, or
// the first word after "#!" of a script (both as absolute paths inside the
// rootfs). A file it cannot read names none.
func loadersOf(f *os.File) []string {
	head := make([]byte, 256)
	n, _ := f.ReadAt(head, 0)
	head = head[:n]
	if rest, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		if fs := strings.Fields(string(line)); len(fs) > 0 && path.IsAbs(fs[0]) {
			return []string{path.Clean(fs[0])}
		}
		return nil
	}
	ef, err := elf.NewFile(io.NewSectionReader(f, 0, 1<<30))
	if err != nil {
		return nil
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP || p.Filesz > 4096 {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err == nil {
			if in := strings.TrimRight(string(b), "\x00"); path.IsAbs(in) {
				return []string{path.Clean(in)}
			}
		}
	}
	return nil
}

// mountDests is a destination lexically cleaned and, when it exists in the
// rootfs, resolved through its symlinks inside the root.
func mountDests(root *os.File, dest string) []string {
	d := path.Clean("/" + dest)
	out := []string{d}
	f, err := fsafe.OpenInRoot(root, d, unix.O_PATH)
	if err != nil {
		return out
	}
	defer f.Close()
	if r, err := inRootPath(root, f); err == nil && r != d {
		out = append(out, r)
	}
	return out
}

// inRootPath is f's path relative to root, as "/..." (symlinks resolved).
func inRootPath(root, f *os.File) (string, error) {
	rp, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", root.Fd()))
	if err != nil {
		return "", fmt.Errorf("read rootfs path: %w", err)
	}
	fp, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return "", fmt.Errorf("read executable path: %w", err)
	}
	if fp == rp {
		return "/", nil
	}
	rel, ok := strings.CutPrefix(fp, strings.TrimSuffix(rp, "/")+"/")
	if !ok {
		return "", fmt.Errorf("%s is not inside the rootfs %s", fp, rp)
	}
	return "/" + rel, nil
}
