package trust

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// readCatalogFile reads the envelope at path: absolute path, last component
// not a symlink (O_NOFOLLOW), never blocking on a fifo (O_NONBLOCK), a
// regular file by fstat, at most spec.MaxEnvelopeBytes. Ownership is not
// checked: the signature is what makes a catalog trusted.
func readCatalogFile(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, catErr(path, RuleAbsolutePath, "path is not absolute", "set catalog in the operator config to an absolute path such as "+DefaultCatalogPath, nil)
	}
	f, st, err := fsafe.OpenFile(path)
	var odd *fsafe.NotRegularError
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, catErr(path, RuleMissing, "file does not exist", "install the signed catalog there (gensee catalog sign)", err)
	case errors.Is(err, unix.ELOOP):
		return nil, catErr(path, RuleSymlink, "is a symlink", "install the catalog file itself at this path", err)
	case errors.As(err, &odd):
		return nil, catErr(path, RuleRegular, fmt.Sprintf("is not a regular file (%s)", fsafe.Kind(odd.Mode)), "install the signed catalog as a regular file", nil)
	case err != nil:
		return nil, catErr(path, RuleIO, "cannot be opened", "check the file system", err)
	}
	defer f.Close()
	data, err := fsafe.ReadAll(f, st, spec.MaxEnvelopeBytes)
	var big *fsafe.TooLargeError
	switch {
	case errors.As(err, &big) && big.Grew:
		return nil, catErr(path, RuleSize, fmt.Sprintf("grew past %d bytes while read", spec.MaxEnvelopeBytes), "split or trim the catalog", spec.ErrTooLarge)
	case errors.As(err, &big):
		return nil, catErr(path, RuleSize, fmt.Sprintf("is %d bytes, more than %d", big.Size, spec.MaxEnvelopeBytes), "split or trim the catalog", spec.ErrTooLarge)
	case err != nil:
		return nil, catErr(path, RuleIO, "cannot be read", "check the file system", err)
	}
	return data, nil
}
