package trust

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// DefaultAnchorPath is where the catalog root public key lives unless the
// root-owned operator config moves it (trust_anchor).
const DefaultAnchorPath = "/etc/gensee/catalog-root-public-key.hex"

// maxAnchorBytes caps the anchor file: 64 hex chars and a newline fit.
const maxAnchorBytes = 256

// LoadAnchor reads the ed25519 catalog root public key from path after
// checking, in order: path absolute; every parent directory from / down a
// real directory, root-owned, not group/other-writable; the file opened
// O_NOFOLLOW|O_NONBLOCK (a symlink or fifo never followed or waited on);
// fstat: regular file, uid 0, no group/other mode bits, one hard link,
// at most 256 bytes; contents exactly 64 lowercase hex characters with at
// most one trailing newline. Any refusal is an *AnchorError.
func LoadAnchor(path string) (ed25519.PublicKey, error) {
	if !filepath.IsAbs(path) {
		return nil, anchorErr(path, RuleAbsolutePath, "path is not absolute",
			"set trust_anchor in the operator config to an absolute path such as "+DefaultAnchorPath, nil)
	}
	p := filepath.Clean(path)
	dir, err := openParent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)

	f, st, err := fsafe.OpenFileAt(dir, filepath.Base(p))
	var odd *fsafe.NotRegularError
	switch {
	case errors.As(err, &odd):
		return nil, checkAnchorFile(p, &unix.Stat_t{Mode: odd.Mode})
	case err != nil:
		return nil, openAnchorErr(p, dir, err)
	}
	defer f.Close()
	if err := checkAnchorFile(p, st); err != nil {
		return nil, err
	}
	data, err := fsafe.ReadAll(f, st, maxAnchorBytes)
	if errors.Is(err, fsafe.ErrTooLarge) {
		return nil, anchorErr(p, RuleSize, fmt.Sprintf("grew past %d bytes while read", maxAnchorBytes),
			"write only the 64 hex characters of the ed25519 public key", err)
	}
	if err != nil {
		return nil, anchorErr(p, RuleIO, "cannot be read", "check the file system", err)
	}
	key, err := spec.ParsePublicKeyHex(string(data))
	if err != nil {
		return nil, anchorErr(p, RuleFormat, "contents are not 64 lowercase hex characters (one optional trailing newline)",
			"write the ed25519 public key as `gensee catalog keygen` does (catalog-root-public-key.hex)", err)
	}
	return key, nil
}

func openAnchorErr(p string, dir int, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return anchorErr(p, RuleMissing, "file does not exist",
			"install the catalog root public key there (gensee catalog keygen writes catalog-root-public-key.hex), owned by root, mode 0400", err)
	case errors.Is(err, unix.ELOOP):
		target, _ := readlinkat(dir, filepath.Base(p))
		return anchorErr(p, RuleSymlink, fmt.Sprintf("is a symlink (to %q); the anchor must be a regular file", target),
			"replace it with a copy: install -o root -g root -m 0400 <key file> "+p, err)
	}
	return anchorErr(p, RuleIO, "cannot be opened", "check the file system", err)
}

// checkAnchorFile applies the file rules to st, the fstat of the open fd.
func checkAnchorFile(p string, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return anchorErr(p, RuleRegular, "is not a regular file",
			"replace it with a regular file: install -o root -g root -m 0400 <key file> "+p, nil)
	case st.Uid != 0:
		return anchorErr(p, RuleOwner, fmt.Sprintf("owned by uid %d, not root", st.Uid), "run: chown root:root "+p, nil)
	case st.Mode&0o077 != 0:
		return anchorErr(p, RuleMode, fmt.Sprintf("mode %04o allows group/other access", st.Mode&0o7777), "run: chmod 0400 "+p, nil)
	case st.Nlink != 1:
		return anchorErr(p, RuleLinks, fmt.Sprintf("has %d hard links, so it can be changed through another name", st.Nlink),
			"replace it with a single-link copy: install -o root -g root -m 0400 "+p+" "+p+".new && mv "+p+".new "+p, nil)
	case st.Size > maxAnchorBytes:
		return anchorErr(p, RuleSize, fmt.Sprintf("is %d bytes, more than %d", st.Size, maxAnchorBytes),
			"write only the 64 hex characters of the ed25519 public key", nil)
	}
	return nil
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
