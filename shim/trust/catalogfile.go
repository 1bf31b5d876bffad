package trust

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, catErr(path, RuleMissing, "file does not exist", "install the signed catalog there (gensee catalog sign)", err)
	case errors.Is(err, unix.ELOOP):
		return nil, catErr(path, RuleSymlink, "is a symlink", "install the catalog file itself at this path", err)
	case err != nil:
		return nil, catErr(path, RuleIO, "cannot be opened", "check the file system", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, catErr(path, RuleIO, "cannot stat", "check the file system", err)
	}
	if !st.Mode().IsRegular() {
		return nil, catErr(path, RuleRegular, fmt.Sprintf("is not a regular file (%s)", st.Mode().Type()), "install the signed catalog as a regular file", nil)
	}
	if st.Size() > spec.MaxEnvelopeBytes {
		return nil, catErr(path, RuleSize, fmt.Sprintf("is %d bytes, more than %d", st.Size(), spec.MaxEnvelopeBytes), "split or trim the catalog", spec.ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, spec.MaxEnvelopeBytes+1))
	if err != nil {
		return nil, catErr(path, RuleIO, "cannot be read", "check the file system", err)
	}
	if len(data) > spec.MaxEnvelopeBytes {
		return nil, catErr(path, RuleSize, fmt.Sprintf("grew past %d bytes while read", spec.MaxEnvelopeBytes), "split or trim the catalog", spec.ErrTooLarge)
	}
	return data, nil
}
