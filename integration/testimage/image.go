// Package testimage builds the small OCI image the integration tests and the
// demo import: Debian's busybox-static, the probe program, and a few
// directories. No registry is involved.
package testimage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/gensee/gensee/internal/ocitar"
)

// Name is the image reference the archive carries.
const Name = "docker.io/gensee/test:latest"

// Env is the image's environment; with it, ctr's spec env is predictable.
var Env = []string{"PATH=/bin"}

// busyboxApplets are linked to busybox under /bin.
var busyboxApplets = []string{"sh", "cat", "echo", "ls", "mkdir", "nc", "sleep", "env", "rm", "mkfifo", "ln", "touch", "printf", "true", "false", "dd", "wget", "chmod", "id"}

// Options say where the binaries come from.
type Options struct {
	Busybox string // path to a static busybox, e.g. /bin/busybox
	Probe   string // path to the static probe binary
	Extra   map[string][]byte
	// Name is the image reference the archive carries (default Name).
	Name string
	// Cmd is the image's default command (default ["/bin/sh"]); a CRI
	// sandbox (pause) image needs one that never exits.
	Cmd []string
}

type file = ocitar.File

// Write writes an OCI image layout archive to path.
func Write(path string, o Options) error {
	bb, err := os.ReadFile(o.Busybox)
	if err != nil {
		return fmt.Errorf("read busybox: %w", err)
	}
	probe, err := os.ReadFile(o.Probe)
	if err != nil {
		return fmt.Errorf("read probe: %w", err)
	}
	files := []file{
		{Name: "bin/", Dir: true, Mode: 0o755}, {Name: "etc/", Dir: true, Mode: 0o755},
		{Name: "tmp/", Dir: true, Mode: 0o1777}, {Name: "workspace/", Dir: true, Mode: 0o755},
		{Name: "bin/busybox", Mode: 0o755, Data: bb}, {Name: "bin/probe", Mode: 0o755, Data: probe},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		{Name: "etc/base.txt", Mode: 0o644, Data: []byte("from the image\n")},
	}
	for _, a := range busyboxApplets {
		files = append(files, file{Name: "bin/" + a, Link: "busybox", Mode: 0o777})
	}
	keys := make([]string, 0, len(o.Extra))
	for k := range o.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		files = append(files, file{Name: k, Mode: 0o644, Data: o.Extra[k]})
	}
	layer, err := tarOf(files)
	if err != nil {
		return err
	}
	name, cmd := Name, []string{"/bin/sh"}
	if o.Name != "" {
		name = o.Name
	}
	if o.Cmd != nil {
		cmd = o.Cmd
	}
	return writeLayout(path, layer, name, cmd)
}

var epoch = time.Unix(0, 0)

func tarOf(files []file) ([]byte, error) { return ocitar.Tar(files, epoch) }

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func writeLayout(path string, layer []byte, name string, cmd []string) error {
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": Env, "Cmd": cmd, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digestOf(cfg), Size: len(cfg)},
		"layers": []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digestOf(layer), Size: len(layer)}},
	})
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digestOf(manifest), Size: len(manifest),
			Annotations: map[string]string{"io.containerd.image.name": name, "org.opencontainers.image.ref.name": "latest"}}},
	})
	var out []file
	out = append(out, file{Name: "oci-layout", Mode: 0o644, Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		file{Name: "index.json", Mode: 0o644, Data: index})
	for _, b := range [][]byte{cfg, manifest, layer} {
		out = append(out, file{Name: "blobs/sha256/" + digestOf(b)[7:], Mode: 0o644, Data: b})
	}
	tb, err := tarOf(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, tb, 0o644)
}
