package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/spec"
)

func bundleMounted(t *testing.T, dir string) bool {
	t.Helper()
	ok, err := mountinfo.Mounted(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("mounted %s: %v", dir, err)
	}
	return ok
}

// TestRootfsUnmountAtRelease: the shim unmounts the rootfs it mounted as
// the exit path releases the task (before Delete), except where the spec
// has hooks: a poststop hook, run by runc's delete, still finds it
// mounted. Nothing stays mounted under the bundle after Delete, and the
// gate passes the products of a task that ends within warmAfter (no warm
// helper: a cold one) and of one that runs past it (the warm helper).
func TestRootfsUnmountAtRelease(t *testing.T) {
	e := startEnv(t, catalogOf([]spec.Contract{productsContract()},
		selector("it-unmount", nil, "products")))
	hook := filepath.Join(e.dir, "hook.sh")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\nif [ -e \"$1/bin/sh\" ]; then echo mounted >\"$2\"; else echo unmounted >\"$2\"; fi\n"), 0o700))
	e.writeOperatorConfig(fmt.Sprintf("hook_allowlist = [%q]\n", hook))
	c, ctx := e.clientFor(t, "it-unmount")

	script := "mkdir -p /workspace/out/blobs && printf '{}' > /workspace/out/result.json && echo a > /workspace/out/blobs/a"
	for _, tc := range []struct {
		name  string
		args  []string
		hooks bool
	}{
		{"short", []string{"/bin/sh", "-c", script}, false},
		{"long", []string{"/bin/sh", "-c", script + "; sleep 0.1"}, false},
		{"hooked", []string{"/bin/sh", "-c", script}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "um-" + tc.name
			out := filepath.Join(e.dir, id+".hook")
			bundle := filepath.Join(e.dir, "state", "io.containerd.runtime.v2.task", "it-unmount", id)
			opts := []oci.SpecOpts{oci.WithProcessArgs(tc.args...)}
			if tc.hooks {
				opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
					s.Hooks = &specs.Hooks{Poststop: []specs.Hook{{Path: hook, Args: []string{hook, filepath.Join(bundle, "rootfs"), out}}}}
					return nil
				})
			}
			ctr := e.newClientContainer(t, c, ctx, id, opts...)
			task, err := ctr.NewTask(ctx, cio.NullIO)
			must(t, err)
			ch, err := task.Wait(ctx)
			must(t, err)
			if !bundleMounted(t, filepath.Join(bundle, "rootfs")) {
				t.Fatalf("rootfs not mounted after create")
			}
			must(t, task.Start(ctx))
			st := <-ch
			if st.ExitCode() != 0 {
				t.Fatalf("%s: exit %d", id, st.ExitCode())
			}
			// Without hooks the release's unmount ends on its own (Delete
			// would wait for it); with them the rootfs stays for runc's
			// delete.
			deadline := time.Now().Add(5 * time.Second)
			for !tc.hooks && bundleMounted(t, filepath.Join(bundle, "rootfs")) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if mounted := bundleMounted(t, filepath.Join(bundle, "rootfs")); mounted != tc.hooks {
				t.Fatalf("%s: rootfs mounted before Delete: %v, want %v", id, mounted, tc.hooks)
			}
			if _, err := task.Delete(ctx); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if bundleMounted(t, filepath.Join(bundle, "rootfs")) {
				t.Errorf("rootfs left mounted after Delete")
			}
			ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(bundle))
			for _, m := range ms {
				t.Errorf("mount left under bundle: %s", m.Mountpoint)
			}
			if tc.hooks {
				b, err := os.ReadFile(out)
				if got := strings.TrimSpace(string(b)); got != "mounted" {
					t.Errorf("poststop hook saw the rootfs %q (%v), want mounted", got, err)
				}
			}
			m := e.manifest("it-unmount", id)
			if m.Gate.Verdict != spec.VerdictPass || product(m, "out/result.json") == nil {
				t.Errorf("product gate: verdict %s, violations %+v", m.Gate.Verdict, m.Gate.Violations)
			}
		})
	}
}
