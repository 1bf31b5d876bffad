package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubernetesDeps: the CLI never links client-go or client_golang
// (cmd/gensee-node does): their package initialisation would slow every
// `gensee boundary run`.
func TestNoKubernetesDeps(t *testing.T) {
	for _, p := range deps(t) {
		for _, bad := range []string{"k8s.io/client-go", "k8s.io/api/", "github.com/prometheus/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("cmd/gensee depends on %s", p)
			}
		}
	}
}

// TestNoJSONSchemaDeps: the CLI never links the JSON Schema library
// (cmd/gensee-verifier does, the judge gensee verify json-schema runs):
// its initialisation compiles the meta-schemas, half of every gensee
// command's start-up.
func TestNoJSONSchemaDeps(t *testing.T) {
	for _, p := range deps(t) {
		if strings.HasPrefix(p, "github.com/santhosh-tekuri/jsonschema") || p == "github.com/gensee/gensee/shim/verifier/schema" {
			t.Errorf("cmd/gensee depends on %s", p)
		}
	}
}

// TestNoRuntimeClientDeps: the CLI never links containerd's client nor,
// since gensee events --follow runs gensee-events to subscribe, gRPC,
// ttrpc or any protobuf type (shim/events/wire and shim/runtimeopts are
// the shim's), nor the spec policy
// (containerd's default seccomp profile, its OCI spec and image packages
// and their compressors): their initialisation is every gensee command's
// start-up, `gensee boundary run`'s included.
func TestNoRuntimeClientDeps(t *testing.T) {
	for _, p := range deps(t) {
		for _, bad := range []string{"github.com/containerd/containerd/v2/client", "github.com/containerd/containerd/v2/pkg/oci",
			"github.com/containerd/containerd/v2/contrib/seccomp", "github.com/gensee/gensee/shim/specpolicy", "github.com/klauspost/compress",
			"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/containerd/ttrpc", "github.com/containerd/typeurl",
			"github.com/containerd/containerd/api", "github.com/gensee/gensee/shim/events/wire", "github.com/gensee/gensee/shim/runtimeopts"} {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				t.Errorf("cmd/gensee depends on %s", p)
			}
		}
	}
}

// deps lists the packages cmd/gensee links.
func deps(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	return strings.Fields(string(out))
}
