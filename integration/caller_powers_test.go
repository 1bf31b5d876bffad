package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The caller-powers tests (issue 25) play a containerd client that sets
// fields ctr or a pod author can reach, some only through the Go client:
// each is refused at admission with its rule, or the attempt fails.

// clientFor connects a containerd client to the test daemon; ctx carries
// namespace ns (whose image is imported).
func (e *env) clientFor(t *testing.T, ns string) (*client.Client, context.Context) {
	t.Helper()
	e.ns(ns)
	c, err := client.New(e.sock, client.WithDefaultNamespace(ns), client.WithTimeout(30*time.Second))
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return c, namespaces.WithNamespace(context.Background(), ns)
}

// newClientContainer creates container id from the test image with the
// gensee runtime (the shim reads the daemon's GENSEE_CONFIG) and opts on
// top of the image's spec; cleanup kills and deletes whatever exists.
func (e *env) newClientContainer(t *testing.T, c *client.Client, ctx context.Context, id string, opts ...oci.SpecOpts) client.Container {
	t.Helper()
	img, err := c.GetImage(ctx, e.image)
	must(t, err)
	opts = append([]oci.SpecOpts{oci.WithImageConfig(img)}, opts...)
	ctr, err := c.NewContainer(ctx, id, client.WithImage(img), client.WithNewSnapshot(id+"-snap", img),
		client.WithRuntime(runtimeName, nil), client.WithNewSpec(opts...))
	must(t, err)
	t.Cleanup(func() {
		if task, err := ctr.Task(ctx, nil); err == nil {
			task.Kill(ctx, syscall.SIGKILL)
			task.Delete(ctx, client.WithProcessKill)
		}
		ctr.Delete(ctx, client.WithSnapshotCleanup)
	})
	return ctr
}

// TestCallerProcessPowers: netDevices, realtime scheduling, the realtime
// I/O class, a negative oomScoreAdj and proc/sysfs away from /proc and
// /sys are refused at Create with their rules (issue 25, items 5 and 8).
func TestCallerProcessPowers(t *testing.T) {
	e := startEnv(t, hostileCatalog())
	base := e.baseSpec(t)
	minus := -500
	for _, tc := range []struct {
		name, rule string
		mutate     func(s *specs.Spec)
	}{
		{"netdev", "net_device", func(s *specs.Spec) {
			s.Linux.NetDevices = map[string]specs.LinuxNetDevice{"lo": {Name: "lo2"}}
		}},
		{"fifo", "scheduler_policy", func(s *specs.Spec) {
			s.Process.Scheduler = &specs.Scheduler{Policy: specs.SchedFIFO, Priority: 10}
		}},
		{"deadline", "scheduler_policy", func(s *specs.Spec) {
			s.Process.Scheduler = &specs.Scheduler{Policy: specs.SchedDeadline, Runtime: 1000000, Deadline: 2000000, Period: 2000000}
		}},
		{"iort", "io_priority", func(s *specs.Spec) {
			s.Process.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_RT, Priority: 0}
		}},
		{"oom", "oom_score_adj", func(s *specs.Spec) { s.Process.OOMScoreAdj = &minus }},
		{"proc2", "kernel_fs_destination", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/p2", Type: "proc", Source: "proc", Options: []string{"ro", "nosuid", "nodev", "noexec"}})
		}},
		{"sys2", "kernel_fs_destination", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/s2", Type: "sysfs", Source: "sysfs", Options: []string{"ro", "nosuid", "nodev", "noexec"}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mutate(s)
			out, err := e.runSpec(t, "it-hostile", "pw-"+tc.name, s)
			if err == nil || !strings.Contains(out, "admission refused: "+tc.rule+":") {
				t.Fatalf("want refusal %s: %v\n%s", tc.rule, err, out)
			}
		})
	}
	// What a process may set itself is admitted.
	s := base()
	plus := 500
	s.Process.OOMScoreAdj = &plus
	s.Process.IOPriority = &specs.LinuxIOPriority{Class: specs.IOPRIO_CLASS_BE, Priority: 4}
	s.Process.Args = []string{"/bin/busybox", "cat", "/proc/self/oom_score_adj"}
	if out, err := e.runSpec(t, "it-hostile", "pw-plain", s); err != nil || !strings.Contains(out, "500") {
		t.Fatalf("oomScoreAdj 500 and the best-effort I/O class: %v\n%s", err, out)
	}
}
