package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/internal/roottest"
)

// TestMakeRelease: make release DIST=<tmp> writes the tarball, the
// installer image, the provenance statement and SHA256SUMS;
// `sha256sum -c SHA256SUMS` passes; the tarball's gensee reports the
// version (git describe --tags --always --dirty) in its name; every binary
// but the CLI is static; the statement's subjects are the two artifacts
// with their digests; the installer image holds the binaries and the
// applets its DaemonSet script runs. Gated like the root tests (make test
// runs it): it builds every binary and needs /bin/busybox.
func TestMakeRelease(t *testing.T) {
	roottest.Require(t)
	top, err := filepath.Abs("..")
	must(t, err)
	dist := t.TempDir()
	describe, err := exec.Command("git", "-C", top, "describe", "--tags", "--always", "--dirty").Output()
	must(t, err)
	cmd := exec.Command("make", "--no-print-directory", "-C", top, "release", "DIST="+dist)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}

	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	must(t, err)
	digest := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		f := strings.Fields(l)
		digest[f[1]] = f[0]
	}
	var tarball, image, stmt string
	for n := range digest {
		switch {
		case strings.HasSuffix(n, ".tar.gz"):
			tarball = n
		case strings.HasSuffix(n, ".oci.tar"):
			image = n
		case strings.HasSuffix(n, ".intoto.json"):
			stmt = n
		}
	}
	if len(digest) != 3 || tarball == "" || image == "" || stmt == "" {
		t.Fatalf("SHA256SUMS lists %v, want the tarball, the installer image and the statement", digest)
	}
	// Others may change the tree while make runs: a -dirty suffix may come or go.
	version := strings.TrimSuffix(strings.TrimPrefix(tarball, "gensee-"), "-linux-"+goarch(t)+".tar.gz")
	if strings.TrimSuffix(version, "-dirty") != strings.TrimSuffix(strings.TrimSpace(string(describe)), "-dirty") {
		t.Errorf("tarball %s, want the version %s of git describe", tarball, describe)
	}

	un := t.TempDir()
	x := exec.Command("tar", "-xzf", filepath.Join(dist, tarball), "-C", un)
	if out, err := x.CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	root := filepath.Join(un, strings.TrimSuffix(tarball, ".tar.gz"))
	out, err := exec.Command(filepath.Join(root, "bin/gensee"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "gensee "+version+" ") {
		t.Errorf("gensee version from the tarball: %v %q, want gensee %s", err, out, version)
	}
	for _, p := range []string{"LICENSE", "README.md", "VERSION", "install.sh", "docs/cli.md", "contrib/containerd/gensee-runtime.toml",
		"contrib/hooks/gensee.json", "contrib/kubernetes/installer/Containerfile", "share/man/man1/gensee.1"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("not in the tarball: %v", err)
		}
	}
	if lic, _ := os.ReadFile(filepath.Join(root, "LICENSE")); !bytes.Contains(lic, []byte("Apache License")) {
		t.Errorf("LICENSE is not the Apache License")
	}
	for _, b := range installedBinaries {
		f, err := elf.Open(filepath.Join(root, "bin", b))
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		if dynamic != (b == "gensee") {
			t.Errorf("%s: dynamically linked %v; want static for all but the CLI (cgo for NSS)", b, dynamic)
		}
	}

	var st struct {
		Type    string `json:"_type"`
		Subject []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		PredicateType string `json:"predicateType"`
		Predicate     struct {
			BuildDefinition struct {
				ExternalParameters   map[string]string `json:"externalParameters"`
				InternalParameters   map[string]string `json:"internalParameters"`
				ResolvedDependencies []struct {
					Name   string            `json:"name"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Builder struct {
					ID string `json:"id"`
				} `json:"builder"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	b, err := os.ReadFile(filepath.Join(dist, stmt))
	must(t, err)
	must(t, json.Unmarshal(b, &st))
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" || st.Predicate.RunDetails.Builder.ID == "" {
		t.Errorf("statement: %s", b)
	}
	if len(st.Subject) != 2 || st.Subject[0].Name != tarball || st.Subject[0].Digest["sha256"] != digest[tarball] ||
		st.Subject[1].Name != image || st.Subject[1].Digest["sha256"] != digest[image] {
		t.Errorf("subjects %+v, want %s and %s with the digests of SHA256SUMS", st.Subject, tarball, image)
	}
	bd := st.Predicate.BuildDefinition
	commit, _ := exec.Command("git", "-C", top, "rev-parse", "HEAD").Output()
	if bd.ExternalParameters["target"] != "release" || bd.ExternalParameters["version"] != version || bd.InternalParameters["go_version"] == "" ||
		len(bd.ResolvedDependencies) != 2 || bd.ResolvedDependencies[0].Digest["gitCommit"] != strings.TrimSpace(string(commit)) ||
		bd.ResolvedDependencies[1].Name != "go.sum" || bd.ResolvedDependencies[1].Digest["sha256"] == "" {
		t.Errorf("build definition: %+v", bd)
	}

	files := imageFiles(t, filepath.Join(dist, image))
	for _, want := range []string{"opt/gensee/bin/containerd-shim-gensee-v2", "opt/gensee/bin/gensee-shim", "opt/gensee/bin/gensee-gate-helper", "opt/gensee/bin/gensee-runc",
		"opt/gensee/bin/gensee", "opt/gensee/bin/gensee-verifier", "opt/gensee/bin/gensee-events", "bin/busybox", "bin/sh", "bin/install", "bin/mv", "bin/chown", "bin/chmod"} {
		if !slices.Contains(files, want) {
			t.Errorf("installer image lacks %s", want)
		}
	}
}

func goarch(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	must(t, err)
	return strings.TrimSpace(string(out))
}

// imageFiles lists the files of the one layer of the OCI image layout archive at p.
func imageFiles(t *testing.T, p string) []string {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		b, err := io.ReadAll(tr)
		must(t, err)
		blobs[h.Name] = b
	}
	blob := func(digest string) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")] }
	type desc struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct{ Manifests []desc }
	must(t, json.Unmarshal(blobs["index.json"], &index))
	if len(index.Manifests) != 1 || !strings.Contains(index.Manifests[0].Annotations["io.containerd.image.name"], "/gensee/installer:") {
		t.Fatalf("index.json: %s", blobs["index.json"])
	}
	var m struct{ Layers []desc }
	must(t, json.Unmarshal(blob(index.Manifests[0].Digest), &m))
	if len(m.Layers) != 1 {
		t.Fatalf("manifest layers %v, want one", m.Layers)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(m.Layers[0].Digest)))
	must(t, err)
	var names []string
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		names = append(names, h.Name)
	}
	return names
}
