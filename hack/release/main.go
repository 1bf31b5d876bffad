// Command release is make release's helper (hack/release.sh):
//
//	release image -out F.oci.tar -bin DIR -busybox /bin/busybox -name REF [-goarch A]
//	    the DaemonSet installer image (contrib/kubernetes/installer) as an OCI image
//	    layout archive: a static busybox with its applets under /bin and the
//	    release's binaries under /opt/gensee/bin, one layer; ctr images import F.
//	release provenance -out F.json -builder ID -commit C -version V -goarch A
//	    -go-version GOV -target T -gosum go.sum -started TIME ARTIFACT...
//	    an in-toto Statement v1 (the shape cmd/gensee/cli/manifest_intoto.go writes)
//	    whose subjects are the artifacts with their sha256 and whose predicate is
//	    SLSA provenance v1.
//
// SOURCE_DATE_EPOCH dates the image's files and config.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/ocitar"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "image":
		err = imageCmd(os.Args[2:])
	case "provenance":
		err = provenanceCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release image|provenance [flags] (see hack/release/main.go)")
	os.Exit(2)
}

func sourceDate() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ---- the installer image ----

type entry = ocitar.File

func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	out := fs.String("out", "", "OCI image layout archive to write")
	bin := fs.String("bin", "", "directory of the release's binaries")
	busybox := fs.String("busybox", "/bin/busybox", "a static busybox")
	name := fs.String("name", "", "image reference (io.containerd.image.name)")
	goarch := fs.String("goarch", "amd64", "image architecture")
	fs.Parse(args)
	if *out == "" || *bin == "" || *name == "" {
		return errors.New("image: -out, -bin and -name are required")
	}
	bb, err := os.ReadFile(*busybox)
	if err != nil {
		return err
	}
	list, err := exec.Command(*busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", *busybox, err)
	}
	files := []entry{
		{Name: "bin/", Dir: true, Mode: 0o755}, {Name: "etc/", Dir: true, Mode: 0o755},
		{Name: "opt/", Dir: true, Mode: 0o755}, {Name: "opt/gensee/", Dir: true, Mode: 0o755},
		{Name: "opt/gensee/bin/", Dir: true, Mode: 0o755}, {Name: "tmp/", Dir: true, Mode: 0o1777},
		{Name: "bin/busybox", Mode: 0o755, Data: bb},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")},
	}
	applets := strings.Fields(string(list))
	slices.Sort(applets)
	for _, a := range applets {
		if a != "busybox" && !strings.Contains(a, "/") {
			files = append(files, entry{Name: "bin/" + a, Link: "busybox", Mode: 0o777})
		}
	}
	if !slices.Contains(applets, "install") {
		// Debian's busybox-static has no install applet; the DaemonSet's script uses it.
		files = append(files, entry{Name: "bin/install", Mode: 0o755, Data: []byte(installScript)})
	}
	ents, err := os.ReadDir(*bin)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(*bin, e.Name()))
		if err != nil {
			return err
		}
		files = append(files, entry{Name: "opt/gensee/bin/" + e.Name(), Mode: 0o755, Data: b})
	}
	layer, err := tarOf(files)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(layer)
	if err := zw.Close(); err != nil {
		return err
	}
	tag := *name
	if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
		tag = tag[i+1:]
	} else {
		tag = "latest"
	}
	created := sourceDate().Format(time.RFC3339)
	cfg, _ := json.Marshal(map[string]any{
		"created": created, "architecture": *goarch, "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}, "Cmd": []string{"/bin/sh"}, "WorkingDir": "/",
			"Labels": map[string]string{"org.opencontainers.image.title": "gensee-installer", "org.opencontainers.image.version": tag}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + sha256Hex(layer)}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", cfg, nil),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes(), nil)},
	})
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{desc("application/vnd.oci.image.manifest.v1+json", manifest,
			map[string]string{"io.containerd.image.name": *name, "org.opencontainers.image.ref.name": tag})},
	})
	outFiles := []entry{
		{Name: "oci-layout", Mode: 0o644, Data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{Name: "index.json", Mode: 0o644, Data: index},
		{Name: "blobs/", Dir: true, Mode: 0o755}, {Name: "blobs/sha256/", Dir: true, Mode: 0o755},
	}
	for _, b := range [][]byte{cfg, manifest, gz.Bytes()} {
		outFiles = append(outFiles, entry{Name: "blobs/sha256/" + sha256Hex(b), Mode: 0o644, Data: b})
	}
	tb, err := tarOf(outFiles)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, tb, 0o644)
}

// installScript is install(1) as contrib/kubernetes/install/daemonset.yaml calls it:
// install [-o UID] [-g GID] [-m MODE] SRC DST.
const installScript = `#!/bin/sh
# install [-o UID] [-g GID] [-m MODE] SRC DST: the subset of install(1) the installer
# DaemonSet's script uses (this busybox has no install applet).
set -eu
o= g= m=0755
while getopts o:g:m: f; do
	case $f in
	o) o=$OPTARG ;;
	g) g=$OPTARG ;;
	m) m=$OPTARG ;;
	*) echo "usage: install [-o UID] [-g GID] [-m MODE] SRC DST" >&2; exit 1 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: install [-o UID] [-g GID] [-m MODE] SRC DST" >&2; exit 1; }
rm -f "$2"
cp "$1" "$2"
[ -z "$o$g" ] || chown "$o${g:+:$g}" "$2"
chmod "$m" "$2"
`

func desc(mediaType string, b []byte, ann map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": "sha256:" + sha256Hex(b), "size": len(b)}
	if ann != nil {
		d["annotations"] = ann
	}
	return d
}

func tarOf(files []entry) ([]byte, error) { return ocitar.Tar(files, sourceDate()) }

// ---- provenance ----

// The in-toto Statement v1 as cmd/gensee/cli/manifest_intoto.go writes it.
const (
	inTotoStatementType = "https://in-toto.io/Statement/v1"
	slsaProvenanceType  = "https://slsa.dev/provenance/v1"
	buildType           = "https://github.com/gensee/gensee/hack/release@v1"
)

type inTotoStmt struct {
	Type          string          `json:"_type"`
	Subject       []inTotoSubject `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     any             `json:"predicate"`
}

type inTotoSubject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// resourceDescriptor is SLSA's (in-toto's) ResourceDescriptor, the fields used here.
type resourceDescriptor struct {
	URI    string            `json:"uri,omitempty"`
	Name   string            `json:"name,omitempty"`
	Digest map[string]string `json:"digest"`
}

type provenance struct {
	BuildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   map[string]string    `json:"externalParameters"`
		InternalParameters   map[string]string    `json:"internalParameters"`
		ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
		Metadata struct {
			StartedOn  string `json:"startedOn,omitempty"`
			FinishedOn string `json:"finishedOn"`
		} `json:"metadata"`
	} `json:"runDetails"`
}

func provenanceCmd(args []string) error {
	fs := flag.NewFlagSet("provenance", flag.ExitOnError)
	out := fs.String("out", "", "statement to write")
	builder := fs.String("builder", "", "builder id")
	commit := fs.String("commit", "", "git commit built")
	version := fs.String("version", "", "VERSION")
	goarch := fs.String("goarch", "", "GOARCH")
	goVersion := fs.String("go-version", "", "Go toolchain version")
	target := fs.String("target", "release", "make target")
	gosum := fs.String("gosum", "go.sum", "go.sum of the module built")
	started := fs.String("started", "", "build start (RFC 3339)")
	fs.Parse(args)
	if *out == "" || *builder == "" || *commit == "" || fs.NArg() == 0 {
		return errors.New("provenance: -out, -builder, -commit and at least one artifact are required")
	}
	st := inTotoStmt{Type: inTotoStatementType, PredicateType: slsaProvenanceType}
	for _, a := range fs.Args() {
		f, err := os.Open(a)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		st.Subject = append(st.Subject, inTotoSubject{Name: filepath.Base(a), Digest: map[string]string{"sha256": hex.EncodeToString(h.Sum(nil))}})
	}
	sum, err := os.ReadFile(*gosum)
	if err != nil {
		return err
	}
	var p provenance
	p.BuildDefinition.BuildType = buildType
	p.BuildDefinition.ExternalParameters = map[string]string{"target": *target, "version": *version, "goos": "linux", "goarch": *goarch}
	p.BuildDefinition.InternalParameters = map[string]string{"go_version": *goVersion}
	p.BuildDefinition.ResolvedDependencies = []resourceDescriptor{
		{URI: "git+https://github.com/gensee/gensee", Digest: map[string]string{"gitCommit": *commit}},
		{Name: "go.sum", Digest: map[string]string{"sha256": sha256Hex(sum)}},
	}
	p.RunDetails.Builder.ID = *builder
	p.RunDetails.Metadata.StartedOn = *started
	p.RunDetails.Metadata.FinishedOn = time.Now().UTC().Format(time.RFC3339)
	st.Predicate = p
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}
