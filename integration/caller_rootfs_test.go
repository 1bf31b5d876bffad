package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/moby/sys/mountinfo"
)

// TestCallerRootfs: a client's rootfs mounts (WithRootFS, which ctr cannot
// set) are admitted only as containerd's own snapshot (issue 25, item 2).
// The host's / bound rw is refused before anything is mounted: no mount
// is left, the host's /bin/sh never ran. An overlay with a host lowerdir
// is refused; the container's own snapshot mounts, handed over the same
// way, run.
func TestCallerRootfs(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	c, ctx := e.clientFor(t, "it-hostile")
	marker := filepath.Join(e.dir, "rootfs-host-written")
	state := filepath.Join(e.dir, "state") + "/"

	// No snapshot of its own: the client's mounts are the whole rootfs
	// (containerd's default spec, no image config to read from one).
	host, err := c.NewContainer(ctx, "rfs-host", client.WithRuntime(runtimeName, nil),
		client.WithNewSpec(oci.WithProcessArgs("/bin/sh", "-c", "echo escaped >"+marker)))
	must(t, err)
	t.Cleanup(func() { host.Delete(ctx) })
	_, err = host.NewTask(ctx, cio.NullIO, client.WithRootFS([]mount.Mount{{Type: "bind", Source: "/", Options: []string{"rbind", "rw"}}}))
	if err == nil || !strings.Contains(err.Error(), "admission refused: rootfs_mount:") || !strings.Contains(err.Error(), "host path /") {
		t.Fatalf("task with the host's / as its rootfs: %v, want refusal rootfs_mount", err)
	}
	if _, err := host.Task(ctx, nil); err == nil {
		t.Fatalf("the refused task exists")
	}
	if exists(marker) {
		t.Fatalf("%s exists: the workload ran on the host's /", marker)
	}
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(state))
	must(t, err)
	for _, m := range ms {
		t.Errorf("mount left under containerd's state: %s (%s, root %s)", m.Mountpoint, m.FSType, m.Root)
	}
	b, err := os.ReadFile(filepath.Join(e.state, "refusals.jsonl"))
	must(t, err)
	if !strings.Contains(string(b), `"rootfs_mount"`) {
		t.Fatalf("refusals.jsonl has no rootfs_mount:\n%s", b)
	}

	// A snapshot containerd made (the container rfs-snap holds it), handed
	// to a container without one: with a host directory slipped under its
	// layers, then as it is.
	e.newClientContainer(t, c, ctx, "rfs-snap", oci.WithProcessArgs("/bin/true"))
	own, err := c.NewContainer(ctx, "rfs-own", client.WithRuntime(runtimeName, nil),
		client.WithNewSpec(oci.WithProcessArgs("/bin/true")))
	must(t, err)
	t.Cleanup(func() { own.Delete(ctx) })
	snap, err := c.SnapshotService("overlayfs").Mounts(ctx, "rfs-snap-snap")
	must(t, err)
	if len(snap) != 1 || snap[0].Type != "overlay" {
		t.Fatalf("the test image's snapshot mounts: %+v, want one overlay", snap)
	}
	bad := snap[0]
	bad.Options = nil
	for _, o := range snap[0].Options {
		if l, ok := strings.CutPrefix(o, "lowerdir="); ok {
			o = "lowerdir=/etc:" + l
		}
		bad.Options = append(bad.Options, o)
	}
	if _, err := own.NewTask(ctx, cio.NullIO, client.WithRootFS([]mount.Mount{bad})); err == nil || !strings.Contains(err.Error(), "admission refused: rootfs_mount:") {
		t.Fatalf("overlay with /etc among its lowerdirs: %v, want refusal rootfs_mount", err)
	}
	task, err := own.NewTask(ctx, cio.NullIO, client.WithRootFS(snap))
	must(t, err)
	ch, err := task.Wait(ctx)
	must(t, err)
	must(t, task.Start(ctx))
	if st := <-ch; st.ExitCode() != 0 {
		t.Fatalf("the container's own snapshot as its rootfs: exit %d (%v)", st.ExitCode(), st.Error())
	}
	if _, err := task.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
