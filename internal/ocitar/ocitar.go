// Package ocitar writes the small, reproducible tar streams an OCI image
// layout is made of (its layers and the layout itself): the test image the
// integration suites import, and the installer image of a release.
package ocitar

import (
	"archive/tar"
	"bytes"
	"time"
)

// File is one entry: a directory, a symlink (Link), or a regular file
// holding Data.
type File struct {
	Name string
	Link string
	Mode int64
	Data []byte
	Dir  bool
}

// Tar writes files in order, every entry stamped mtime (PAX format).
func Tar(files []File, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Typeflag = tar.TypeDir
		case f.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
