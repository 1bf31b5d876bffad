package contrib

import (
	"slices"
	"testing"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/service"
	"github.com/gensee/gensee/spec"
)

// TestContribBuildKit: the BuildKit kit runs RUN steps on this runtime
// through containerd only, names the operator config under the key
// buildkitd decodes (ConfigPath), allows exactly BuildKit's trace socket,
// fails a step whose gate fails, and its catalog selects the worker's
// namespace with a deny_all safe_default (BuildKit cannot annotate a RUN
// container, so the safe_default is what every step gets).
func TestContribBuildKit(t *testing.T) {
	k := loadKit(t)
	bk := k.toml["buildkit/buildkitd.toml"]
	if bk == nil {
		t.Fatal("contrib/buildkit/buildkitd.toml is missing")
	}
	if v, _ := at(bk, "worker", "oci", "enabled").(bool); v {
		t.Error("worker.oci.enabled: the OCI worker runs steps with runc directly, outside the runtime")
	}
	if v, _ := at(bk, "worker", "containerd", "enabled").(bool); !v {
		t.Error("worker.containerd.enabled is not true")
	}
	ns := str(bk, "worker", "containerd", "namespace")
	if got := str(bk, "worker", "containerd", "runtime", "name"); got != service.RuntimeName {
		t.Errorf("worker.containerd.runtime.name = %q, want %q", got, service.RuntimeName)
	}
	opts, _ := at(bk, "worker", "containerd", "runtime", "options").(map[string]any)
	if len(opts) != 1 || opts["ConfigPath"] != config.DefaultPath {
		t.Errorf("runtime options %v, want only ConfigPath = %q (buildkitd ignores other spellings)", opts, config.DefaultPath)
	}

	c, err := config.Parse("buildkit/gensee-config.toml", k.raw["buildkit/gensee-config.toml"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.AllowedRuntimeFiles, []string{"/run/buildkit/otel-grpc.sock"}) {
		t.Errorf("allowed_runtime_files = %v, want BuildKit's trace socket only", c.AllowedRuntimeFiles)
	}
	if c.GateFailedExitStatus == 0 {
		t.Error("gate_failed_exit_status = 0: a failed gate would not fail the RUN step")
	}

	cat, err := spec.ParseCatalog(k.json["buildkit/builders.catalog.json"])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range cat.Selectors {
		if s.Match.Runtime != service.RuntimeName {
			t.Errorf("selector %s: runtime %q", s.ID, s.Match.Runtime)
		}
		if s.Match.ContainerdNamespace != ns {
			continue
		}
		found = true
		sd := cat.Contracts[s.SafeDefault]
		if sd.Network.Mode != spec.NetworkDenyAll || len(sd.Products) > 0 {
			t.Errorf("selector %s: safe_default %s is not a plain deny_all: every RUN step of the worker gets it", s.ID, s.SafeDefault)
		}
		allow := false
		for _, id := range s.Routes {
			allow = allow || cat.Contracts[id].Network.Mode == spec.NetworkAllowExact
		}
		if !allow {
			t.Errorf("selector %s: no route to an allow_exact contract (the fetch step example)", s.ID)
		}
	}
	if !found {
		t.Errorf("no selector matches the worker's containerd namespace %q", ns)
	}
}
