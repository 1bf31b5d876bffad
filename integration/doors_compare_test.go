package integration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// What TestDoors compares. Every field of the manifest is either a
// meaning (the contract's meaning, the same through every door, compared)
// or the door's own (listed in doorOwn with the reason, never compared);
// TestDoorsCoverEveryField keeps that true as the manifest grows.

// meaning is a manifest field (path, as JSON names it) that must read the
// same whichever door ran the contract.
type meaning struct {
	path string
	get  func(m *spec.Manifest) any
	// byNetns: the value depends on where the workload's sockets lived
	// (a private netns or the host's): compared only between runs of the
	// same netns kind.
	byNetns bool
	// own names the doors whose value here is their own, with why.
	own map[string]string
}

// doorOwn are the fields whose value is each door's own, and why.
var doorOwn = map[string]string{
	"operation_id":                           "a fresh random id per run",
	"namespace":                              "the door's own index namespace: the containerd namespace, oci-hooks, host",
	"container_id":                           "the door's own name for the workload: ctr's id, podman's container id, a host run's operation id",
	"host":                                   "only a host run has a host section (user, uid, workspace, writable places, sandbox layers)",
	"subject":                                "the run's own process and cgroup: init pid, start time, cgroup path and id",
	"observation_digest":                     "the observation is of the door's own process: the image's busybox sh with the image's env (podman adds its own) and cwd /, or the host's sh in the staged workspace",
	"command_digest":                         "the same: argv, env and cwd as each door hands them to the workload",
	"volatile_env":                           "the names each door's selector left out of command_digest, of the env that door hands the workload (CRI's HOSTNAME and Service links, podman's own)",
	"deadlines.task_expires_at":              "the run's own start plus the contract's deadline (deadlines.task is compared)",
	"deadlines.catalog_expires_at":           "each door's env signs its own copy of the catalog a moment apart (catalog_version is compared)",
	"enforcement.network.table":              "named after the operation id",
	"enforcement.capabilities_removed":       "each door's own means: the shim narrows the spec (CAP_NET_RAW removed); a hook cannot edit config.json and refuses instead, so nothing is removed (podman runs with --cap-drop=NET_RAW); a host run's command holds no capability at all (ALL)",
	"enforcement.capabilities_removed_execs": "execs: the shim admits each one; podman exec runs no hook; a host run has none",
	"enforcement.seccomp":                    "the shim merges its socket rule into the spec's profile, the hook verifies podman's profile holds it, a host run installs its own filter (host.sandbox.seccomp)",
	"enforcement.exec_no_new_privileges":     "the shim forces no_new_privs on every exec; no hook runs for podman exec (listed in not_enforced); a host run's command has it in host.no_new_privileges",
	"enforcement.not_enforced":               "each door lists the gaps its own path leaves (hooks: execs, exit status, exit ordering; host runs: UDP/ICMP, SYN-ACKs, workspace size, locks, sockets; the shim: exec'd programs, the image's other files)",
	"excluded":                               "mount stubs the engine leaves in the diff are counted here: runc's for ctr, podman's binds (hosts, resolv.conf, hostname, .containerenv), and what the upperdir held before the workload started (the gate's baseline: podman's /etc/mtab); a host run has no rootfs, only its workspace",
}

// meanings are the fields compared across doors.
var meanings = []meaning{
	{path: "schema", get: func(m *spec.Manifest) any { return m.Schema }},
	// Admission: the contract chosen, from which catalog, and why.
	{path: "contract", get: func(m *spec.Manifest) any { return m.Contract }},
	{path: "catalog_version", get: func(m *spec.Manifest) any { return m.CatalogVersion }},
	{path: "inference", get: func(m *spec.Manifest) any { return m.Inference }},
	{path: "deadlines.task", get: func(m *spec.Manifest) any { return m.Deadlines.Task }},
	{path: "deadlines.inference_expires_at", get: func(m *spec.Manifest) any { return m.Deadlines.InferenceExpiresAt }},
	{path: "deadlines.exceeded", get: func(m *spec.Manifest) any { return m.Deadlines.Exceeded }},
	// The network authority as installed.
	{path: "enforcement.network.mechanism", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Mechanism }},
	{path: "enforcement.network.mode", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Mode }},
	{path: "enforcement.network.loopback", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Loopback }},
	{path: "enforcement.network.allow", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Allow }},
	{path: "enforcement.network.serve", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Serve }},
	{path: "enforcement.network.status", get: func(m *spec.Manifest) any { return m.Enforcement.Network.Status }},
	// The scope's cgroup path and id are the run's own; its kind is not.
	{path: "enforcement.network.scope", byNetns: true, get: func(m *spec.Manifest) any {
		return cgroupInScope.ReplaceAllString(m.Enforcement.Network.Scope, "cgroupv2 <cgroup> (id <id>)")
	}},
	{path: "enforcement.network.table_removed", byNetns: true, get: func(m *spec.Manifest) any { return m.Enforcement.Network.TableRemoved }},
	{path: "enforcement.network.abstract_unix", byNetns: true, get: func(m *spec.Manifest) any { return m.Enforcement.Network.AbstractUnix },
		own: map[string]string{"hostrun": "Landlock scopes a host run's abstract sockets to the command (landlock); a container in the host's netns has no such layer (not_enforced)"}},
	// What was seen: whether packets were allowed and denied (the exact
	// numbers depend on retransmit timing), which targets were denied.
	{path: "observation.counters", get: func(m *spec.Manifest) any {
		c := m.Observation.Counters
		return struct {
			Allowed, Denied bool
			Error           string
		}{c.AllowedPackets > 0, c.DeniedPackets > 0, c.Error}
	}},
	{path: "observation.denied_attempts", get: func(m *spec.Manifest) any {
		var targets []string
		for _, a := range m.Observation.DeniedAttempts.Items {
			targets = append(targets, a.Target+"/"+a.Proto)
		}
		slices.Sort(targets)
		return struct {
			Present  bool
			Targets  []string
			Complete bool
		}{len(targets) > 0, slices.Compact(targets), m.Observation.DeniedAttempts.Complete}
	}},
	{path: "observation.served", get: func(m *spec.Manifest) any {
		s := m.Observation.Served
		if s == nil {
			return nil
		}
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d answered=%v", p.Proto, p.Port, p.Packets > 0))
		}
		return struct {
			Answered, Connections bool
			Ports                 []string
			ReversePathDropped    uint64
			PortsWithheld         string
		}{s.Packets > 0, s.Connections > 0, ports, s.ReversePathDropped, s.PortsWithheld}
	}},
	{path: "observation.escapes", get: func(m *spec.Manifest) any { return len(m.Observation.Escapes) }},
	{path: "observation.table_drift", get: func(m *spec.Manifest) any { return m.Observation.TableDrift }},
	// The gate.
	{path: "products", get: func(m *spec.Manifest) any { return m.Products }},
	{path: "gate", get: func(m *spec.Manifest) any { return m.Gate }},
	{path: "unclaimed", get: func(m *spec.Manifest) any { return m.Unclaimed }},
	// The outcome.
	{path: "findings", get: func(m *spec.Manifest) any {
		var sigs []string
		for _, f := range m.Findings {
			sigs = append(sigs, f.Signature)
		}
		return sigs
	}},
	{path: "findings_error", get: func(m *spec.Manifest) any { return m.FindingsError }},
	{path: "drained", get: func(m *spec.Manifest) any { return m.Drained }},
	{path: "exit_status", get: func(m *spec.Manifest) any { return m.ExitStatus },
		own: map[string]string{"hooks": "an OCI hook is never told the init's exit status: its 0 says nothing (docs/design.md §10)"}},
	{path: "semantically_verified", get: func(m *spec.Manifest) any { return m.SemanticallyVerified }},
	{path: "promoted", get: func(m *spec.Manifest) any { return m.Promoted }},
}

// cgroupInScope is the run's own part of a network scope.
var cgroupInScope = regexp.MustCompile(`cgroupv2 \S+ \(id \d+\)`)

// compareDoors fails t for every meaning whose value differs between
// runs that must agree, and returns those differences, one line each
// with every door's value.
func compareDoors(t *testing.T, c doorCase, runs map[string]doorRun) []string {
	t.Helper()
	names := make([]string, 0, len(runs))
	for n, r := range runs {
		if r.m != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var diffs []string
	for _, f := range meanings {
		groups := map[string][]string{} // netns kind ("" for all) → door=value
		doors := map[string][]string{}
		values := map[string]map[string]bool{}
		for _, n := range names {
			r := runs[n]
			v := render(f.get(r.m))
			if why, ok := f.own[n]; ok {
				t.Logf("not compared: %s %s = %s (%s)", n, f.path, v, why)
				continue
			}
			g := ""
			if f.byNetns {
				g = string(r.netns) + " netns: "
			}
			groups[g] = append(groups[g], n+"="+v)
			doors[g] = append(doors[g], n)
			if values[g] == nil {
				values[g] = map[string]bool{}
			}
			values[g][v] = true
		}
		for g, vs := range groups {
			if len(values[g]) == 1 {
				for v := range values[g] {
					t.Logf("agrees: %s %s= %s (%s)", f.path, g, v, strings.Join(doors[g], ", "))
				}
				continue
			}
			line := fmt.Sprintf("%s: %s%s", f.path, g, strings.Join(vs, " | "))
			t.Errorf("%s differs across doors: %s", c.name, line)
			diffs = append(diffs, line)
		}
	}
	return diffs
}

// render is v as compact JSON ("null" for none).
func render(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// TestDoorsCoverEveryField: every field of spec.Manifest is a meaning or
// a door's own, and every path either list names exists. No root.
func TestDoorsCoverEveryField(t *testing.T) {
	named := map[string]bool{}
	for p := range doorOwn {
		named[p] = true
	}
	for _, f := range meanings {
		if named[f.path] {
			t.Errorf("%s is both a meaning and a door's own", f.path)
		}
		named[f.path] = true
	}
	seen := map[string]bool{}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := prefix + name
			seen[p] = true
			if named[p] {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}) {
				walk(p+".", ft)
				continue
			}
			t.Errorf("manifest field %s is neither compared by TestDoors nor listed as a door's own", p)
		}
	}
	walk("", reflect.TypeOf(spec.Manifest{}))
	for p := range named {
		if !seen[p] {
			t.Errorf("%s names no manifest field", p)
		}
	}
}
