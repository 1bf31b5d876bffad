package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"
)

// registry pushes with the distribution HTTP API (monolithic blob uploads).
type registry struct {
	host string
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
}

var client = &http.Client{Timeout: time.Minute}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// push uploads img's layer, config and manifest under ref and returns the
// manifest digest.
func (r *registry) push(ref string, img image) (string, error) {
	repo, tag, ok := splitRef(ref)
	if !ok {
		return "", fmt.Errorf("reference %q: want host/path:tag", ref)
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{
			"Env":        append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, img.env...),
			"Entrypoint": img.entrypoint, "Cmd": img.cmd, "User": img.user, "WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(img.layer)}},
	})
	if err != nil {
		return "", err
	}
	layer := descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digestOf(img.layer), Size: len(img.layer)}
	config := descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digestOf(cfg), Size: len(cfg)}
	for _, b := range []struct {
		d    descriptor
		data []byte
	}{{layer, img.layer}, {config, cfg}} {
		if err := r.blob(repo, b.d.Digest, b.data); err != nil {
			return "", err
		}
	}
	const mt = "application/vnd.oci.image.manifest.v1+json"
	m, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mt, "config": config, "layers": []descriptor{layer}})
	if err != nil {
		return "", err
	}
	if _, err := r.do(http.MethodPut, r.url("/v2/"+repo+"/manifests/"+tag), mt, m, http.StatusCreated); err != nil {
		return "", fmt.Errorf("put manifest: %w", err)
	}
	return digestOf(m), nil
}

// blob uploads data unless the repository already has it.
func (r *registry) blob(repo, digest string, data []byte) error {
	if _, err := r.do(http.MethodHead, r.url("/v2/"+repo+"/blobs/"+digest), "", nil, http.StatusOK); err == nil {
		return nil
	}
	resp, err := r.do(http.MethodPost, r.url("/v2/"+repo+"/blobs/uploads/"), "", nil, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("start upload: %w", err)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return fmt.Errorf("upload location: %w", err)
	}
	u := r.url("/").ResolveReference(loc)
	q := u.Query()
	q.Set("digest", digest)
	u.RawQuery = q.Encode()
	if _, err := r.do(http.MethodPut, u, "application/octet-stream", data, http.StatusCreated); err != nil {
		return fmt.Errorf("upload blob %s: %w", digest, err)
	}
	return nil
}

func (r *registry) url(p string) *url.URL { return &url.URL{Scheme: "http", Host: r.host, Path: p} }

func (r *registry) do(method string, u *url.URL, contentType string, body []byte, want int) (*http.Response, error) {
	req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u.Path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return resp, nil
}

// splitRef splits host/path:tag into the local repository host/path and
// the tag.
func splitRef(ref string) (repo, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || !strings.Contains(ref[:i], "/") {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}
