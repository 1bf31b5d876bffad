package main

import (
	"archive/tar"
	"bytes"
	"path"
	"sort"
	"time"
)

// rootfs is the content every image shares: busybox with its applets in
// /bin, the usual directories, and users. passwd and group are appended to
// the base entries (root, www-data, nobody).
type rootfs struct {
	busybox       []byte
	applets       []string
	passwd, group string
}

type file struct {
	name string // relative, no leading slash
	mode int64  // permission bits, setuid included
	data []byte
	link string // symlink target when set
}

const (
	basePasswd = "root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	baseGroup  = "root:x:0:\nwww-data:x:33:\nnogroup:x:65534:\n"
)

// layer returns the uncompressed tar of the rootfs plus extra. Entries are
// sorted and timestamps fixed, so equal inputs give equal digests.
func (r rootfs) layer(extra []file) []byte {
	files := []file{
		{name: "bin/busybox", mode: 0o755, data: r.busybox},
		{name: "etc/passwd", mode: 0o644, data: []byte(basePasswd + r.passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(baseGroup + r.group)},
	}
	for _, a := range r.applets {
		if a != "busybox" {
			files = append(files, file{name: "bin/" + a, mode: 0o777, link: "busybox"})
		}
	}
	files = append(files, extra...)
	dirs := map[string]int64{"tmp": 0o1777, "root": 0o700, "var/run": 0o755, "run": 0o755, "home": 0o755, "proc": 0o555, "sys": 0o555, "dev": 0o755}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	for _, f := range files {
		names = append(names, path.Dir(f.name))
	}
	for _, n := range names {
		for d := n; d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
	}
	names = names[:0]
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range names {
		must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: dirs[d], ModTime: epoch, Format: tar.FormatPAX}))
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: epoch, Format: tar.FormatPAX}
		if f.link != "" {
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		must(tw.WriteHeader(h))
		_, err := tw.Write(f.data)
		must(err)
	}
	must(tw.Close())
	return buf.Bytes()
}

// must panics on a tar error: writing to a bytes.Buffer only fails on a
// programming error (a header that does not match its data).
func must(err error) {
	if err != nil {
		panic(err)
	}
}
