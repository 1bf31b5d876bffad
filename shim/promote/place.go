package promote

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
)

// tempPrefix starts the name of a promotion's temporary beside its
// destination; the rest is random, so a destination's own name of up to
// 255 bytes still fits.
const tempPrefix = ".gensee-promote-"

// placed is what place did.
type placed struct {
	changed bool // false: the destination already held the product
}

// place puts the staged copy of pr (below operation directory opDir) at
// t, atomically: copied while hashed into a temporary in the destination's
// directory, checked against the record, fsynced and renamed into place
// without replacing anything. The destination's directory is reached from
// the promotion root one component at a time, never through a symlink,
// and must exist. A destination that already holds exactly the staged
// product (a re-run) is left as it is. A *Refusal leaves the destination
// as it was; so does any other error, but for a temporary it could not
// remove (named in the error).
func place(opDir string, pr *spec.ProductRecord, t Target, allowExec bool) (placed, error) {
	src, srcName, err := openStagedParent(opDir, pr.Staged)
	if err != nil {
		return placed{}, err
	}
	defer unix.Close(src)
	dst, name, rf := openTargetParent(t)
	if rf != nil {
		return placed{}, rf
	}
	defer unix.Close(dst)
	limit := len(pr.Entries) + 2 // the product itself, and one more to see an extra

	var st unix.Stat_t
	switch err := unix.Fstatat(dst, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && (st.Uid != 0 || st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink != 1):
		// A re-run finds what root placed, and nothing else.
		return placed{}, refuse(RuleDestExists, "choose another --to, or move what is there away first: a promotion never replaces anything",
			"%s exists and was not placed by a promotion (owner uid %d, %d links)", t.Dest(), st.Uid, st.Nlink)
	case err == nil:
		return existing(src, srcName, dst, name, pr, t, limit)
	case !errors.Is(err, unix.ENOENT):
		return placed{}, fmt.Errorf("stat %s: %w", t.Dest(), err)
	}

	tmp, err := tempName()
	if err != nil {
		return placed{}, err
	}
	items, err := copyObject(src, srcName, dst, tmp, copyOptions{limit: limit, allowExec: allowExec})
	if err == nil {
		if diff := conform(items, pr); diff != "" {
			err = refuse(RuleCopyMismatch, "do not use this product; keep the operation directory for investigation (gensee manifest verify)",
				"what was copied from %s is not the product the manifest records: %s", path.Join(opDir, pr.Staged), diff)
		}
	}
	if err != nil {
		return placed{}, discard(dst, tmp, t, copyRefusal(err, pr, opDir))
	}
	switch err := renameNoReplace(dst, tmp, name); {
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		// Someone else put something there since the stat above.
		if rerr := removeObject(dst, tmp); rerr != nil {
			return placed{}, fmt.Errorf("remove temporary %s: %w", path.Join(path.Dir(t.Dest()), tmp), rerr)
		}
		return existing(src, srcName, dst, name, pr, t, limit)
	case err != nil:
		return placed{}, discard(dst, tmp, t, fmt.Errorf("rename into %s: %w", t.Dest(), err))
	}
	if err := unix.Fsync(dst); err != nil {
		return placed{changed: true}, fmt.Errorf("sync %s: %w", path.Dir(t.Dest()), err)
	}
	return placed{changed: true}, nil
}

// existing judges a destination that is already there: the same objects
// as the staged copy (a re-run) is success with nothing changed, anything
// else is never replaced.
func existing(src int, srcName string, dst int, name string, pr *spec.ProductRecord, t Target, limit int) (placed, error) {
	staged, err := readObject(src, srcName, limit)
	if err != nil {
		return placed{}, fmt.Errorf("read the staged product %s: %w", pr.Staged, err)
	}
	have, err := readObject(dst, name, limit)
	if err == nil && conform(staged, pr) == "" && sameItems(staged, have) {
		return placed{}, nil
	}
	return placed{}, refuse(RuleDestExists, "choose another --to, or move what is there away first: a promotion never replaces anything",
		"%s exists and is not this product", t.Dest())
}

// copyRefusal turns a failed copy into the refusal it stands for, or
// keeps the error.
func copyRefusal(err error, pr *spec.ProductRecord, opDir string) error {
	var ex *errExecutable
	switch {
	case errors.As(err, &ex):
		return refuse(RuleExecutable, "have the verifier name the contract it must run under (its receipt's consumer_contract)",
			"staged file %s of product %q is executable and the receipt names no consumer contract", ex.rel, pr.Slot)
	case errors.Is(err, errTooMany):
		return refuse(RuleCopyMismatch, "do not use this product; keep the operation directory for investigation (gensee manifest verify)",
			"the staged product %s holds more than the manifest's %d entries", path.Join(opDir, pr.Staged), len(pr.Entries))
	}
	return err
}

// discard removes a promotion's temporary and returns err, or says that
// the temporary stayed.
func discard(dst int, tmp string, t Target, err error) error {
	if rerr := removeObject(dst, tmp); rerr != nil {
		return fmt.Errorf("%w; and the temporary %s could not be removed: %v", err, path.Join(path.Dir(t.Dest()), tmp), rerr)
	}
	return err
}

// openStagedParent opens the directory that holds a staged product
// (staged, "staged/<slot>", below opDir) without following a symlink
// anywhere below opDir.
func openStagedParent(opDir, staged string) (int, string, error) {
	od, err := fsafe.OpenDirAt(unix.AT_FDCWD, opDir)
	if err != nil {
		return -1, "", fmt.Errorf("open operation directory: %w", err)
	}
	defer unix.Close(od)
	fd, err := fsafe.Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY}.Open(od, path.Dir(staged))
	if err != nil {
		return -1, "", fmt.Errorf("open the staged product %s: %w", staged, err)
	}
	return fd, path.Base(staged), nil
}

// openTargetParent opens the directory the destination goes in: the
// promotion root as the operator configured it, then each component below
// it with O_NOFOLLOW, so a symlink anywhere below the root (one a user of
// the root planted) is never followed.
func openTargetParent(t Target) (int, string, *Refusal) {
	rfd, err := fsafe.RetryEINTR(func() (int, error) {
		return unix.Open(t.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return -1, "", refuse(RuleDestParent, "create the promotion root, or have the operator fix promotion_roots",
			"promotion root %s cannot be opened as a directory: %v", t.Root, err)
	}
	defer unix.Close(rfd)
	dir := path.Dir(t.Rel)
	fd, err := fsafe.Walker{Flags: unix.O_RDONLY | unix.O_DIRECTORY}.Open(rfd, dir)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, "", refuse(RuleDestParent, "create it first (mkdir -p "+path.Join(t.Root, dir)+")",
			"the destination's directory %s does not exist", path.Join(t.Root, dir))
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, "", refuse(RuleDestParent, "name a destination reached through real directories only",
			"the way from promotion root %s to %s passes a symlink or a non-directory, which is never followed", t.Root, t.Dest())
	case err != nil:
		return -1, "", refuse(RuleDestParent, "check the destination's directory", "open %s: %v", path.Join(t.Root, dir), err)
	}
	// Only root may write the destination's directory: a user who can
	// could swap the temporary before its rename, put a look-alike at the
	// destination first, or move a root-owned tree to the temporary's name
	// for the cleanup to remove.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, "", refuse(RuleDestParent, "check the destination's directory", "stat %s: %v", path.Join(t.Root, dir), err)
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return -1, "", refuse(RuleDestWritable, "promote into a directory only root can write (chown root, chmod go-w), and hand the product on from there",
			"the destination's directory %s is owned by uid %d with mode %04o: someone other than root can write it", path.Join(t.Root, dir), st.Uid, st.Mode&0o7777)
	}
	return fd, path.Base(t.Rel), nil
}

func tempName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("name a temporary: %w", err)
	}
	return tempPrefix + hex.EncodeToString(b[:]), nil
}

// renameNoReplace renames old to name within dirfd, failing with EEXIST
// when name exists. A file system without RENAME_NOREPLACE (EINVAL) gets
// a check and a plain rename: only another root process writing the same
// name in between could be replaced.
func renameNoReplace(dirfd int, old, name string) error {
	err := unix.Renameat2(dirfd, old, dirfd, name, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	var st unix.Stat_t
	if serr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		return unix.EEXIST
	}
	return unix.Renameat(dirfd, old, dirfd, name)
}
