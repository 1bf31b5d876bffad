package service

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types"
	cdevents "github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/spec"
)

// topicsPublisher records the topics published.
type topicsPublisher struct {
	mu     sync.Mutex
	topics []string
}

func (p *topicsPublisher) Publish(_ context.Context, topic string, _ cdevents.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.topics = append(p.topics, topic)
	return nil
}

func (*topicsPublisher) Close() error { return nil }

// createFixture is a service whose operator config keeps its state in a
// temporary directory, and a request for a bundle holding oci (no
// config.json when nil). Nothing in it reaches admit.
func createFixture(t *testing.T, oci *specs.Spec) (*service, *taskAPI.CreateTaskRequest, *topicsPublisher, string) {
	t.Helper()
	state, bundle := t.TempDir(), t.TempDir()
	if oci != nil {
		b, err := json.Marshal(oci)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pub := &topicsPublisher{}
	s := newService(context.Background(), nil, newHoldingPublisher(pub))
	s.loadConfig = func(string) (config.Config, error) {
		return config.Config{StateDir: state, TrustAnchor: filepath.Join(state, "none"), Catalog: filepath.Join(state, "none")}, nil
	}
	return s, &taskAPI.CreateTaskRequest{ID: "c1", Bundle: bundle}, pub, state
}

// refusalLines are the refusals log's lines.
func refusalLines(t *testing.T, state string) []spec.RefusalRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "refusals.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []spec.RefusalRecord
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r spec.RefusalRecord
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// TestCreateRefusesOnce: a preflight refusal is Create's answer
// (PermissionDenied with the refusal's sentence), one refusals line and
// one admission_denied event; the checks run in their order (the request
// before the spec, a restore before the namespaces); any other failure is
// an error of its own category with no refusal kept.
func TestCreateRefusesOnce(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "default")
	t.Cleanup(func() { waitGCReleased(t) })
	for _, tc := range []struct {
		name          string
		oci           *specs.Spec
		mutate        func(*taskAPI.CreateTaskRequest)
		reason, field string
		isCategory    func(error) bool
	}{
		{name: "no process", oci: &specs.Spec{}, reason: "no_process", field: "process"},
		{name: "a restore before the namespaces", oci: &specs.Spec{}, mutate: func(r *taskAPI.CreateTaskRequest) { r.Checkpoint = "/cp" }, reason: "checkpoint_restore"},
		{name: "the request before the spec", mutate: func(r *taskAPI.CreateTaskRequest) { r.Stdout = "file:///etc/shadow" }, reason: "stdio_uri", field: "stdout"},
		{name: "a rootfs mount", mutate: func(r *taskAPI.CreateTaskRequest) {
			r.Rootfs = []*types.Mount{{Type: "bind", Source: "/a"}, {Type: "bind", Source: "/b"}}
		}, reason: "rootfs_mount", field: "rootfs"},
		{name: "no bundle config", isCategory: errdefs.IsInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r, pub, state := createFixture(t, tc.oci)
			if tc.mutate != nil {
				tc.mutate(r)
			}
			_, err := s.Create(ctx, r)
			err = errgrpc.ToNative(err)
			lines := refusalLines(t, state)
			if tc.isCategory != nil {
				if !tc.isCategory(err) || len(lines) != 0 || len(pub.topics) != 0 {
					t.Fatalf("got %v, %d refusal lines, events %v; want the error's own category, none kept", err, len(lines), pub.topics)
				}
				return
			}
			if !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), spec.RefusalPrefix+tc.reason+": ") {
				t.Fatalf("got %v, want PermissionDenied for %s", err, tc.reason)
			}
			if len(lines) != 1 || lines[0].Reason != tc.reason || lines[0].Field != tc.field || lines[0].ContainerID != "c1" || lines[0].Namespace != "default" || lines[0].Runtime != RuntimeName {
				t.Fatalf("refusals log %+v, want one %s line at %q", lines, tc.reason, tc.field)
			}
			if len(pub.topics) != 1 {
				t.Fatalf("events %v, want one admission_denied", pub.topics)
			}
		})
	}
}

// TestRefusal: a check refuses what it cannot judge.
func TestRefusal(t *testing.T) {
	if refusal(nil, "r") != nil {
		t.Fatal("no error made a refusal")
	}
	own := spec.Refuse("rootfs_mount", "rootfs", "", "x")
	if refusal(own, "r") != own {
		t.Fatal("a refusal was not kept")
	}
	if rf := refusal(os.ErrPermission, "cgroup_not_own"); rf == nil || rf.Reason != "cgroup_not_own" || !strings.Contains(rf.Message, "permission denied") {
		t.Fatalf("another error: %v", rf)
	}
}

// waitGCReleased waits for the collector holds Create took (holdGC) to be
// released, so that they outlive no test.
func waitGCReleased(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(2 * gcBurstSettle); ; time.Sleep(10 * time.Millisecond) {
		gcBurst.mu.Lock()
		held := gcBurst.held
		gcBurst.mu.Unlock()
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d collector holds still in place", held)
		}
	}
}
