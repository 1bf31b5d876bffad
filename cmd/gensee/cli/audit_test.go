package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

func allOK() HostFacts {
	return HostFacts{Root: true, Kernel: "6.18.0-test", Probes: map[string]ProbeResult{
		probeCgroup2:   {ProbeOK, "cgroup2 mounted at /sys/fs/cgroup"},
		probeOverlay:   {ProbeOK, "overlay registered"},
		probeNftSocket: {ProbeOK, "ok"},
		probeNflog:     {ProbeOK, "ok"},
		probeTable:     {ProbeOK, "ok"},
		probeSeccomp:   {ProbeOK, "runc applies seccomp profiles"},
	}}
}

// with returns a copy of f with the named probes replaced.
func with(f HostFacts, set map[string]ProbeResult) HostFacts {
	out := HostFacts{Root: f.Root, Kernel: f.Kernel, Probes: map[string]ProbeResult{}}
	for k, v := range f.Probes {
		out.Probes[k] = v
	}
	for k, v := range set {
		out.Probes[k] = v
	}
	return out
}

func fakeProbe(f HostFacts) Prober {
	return func(context.Context, spec.Network) HostFacts { return f }
}

func TestBuildAudit(t *testing.T) {
	full := &spec.Contract{ID: "c", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}, Deadline: "15m",
		Products: []spec.Product{{Class: spec.ClassBlob, Slot: "out/a"}}}
	bare := &spec.Contract{ID: "c", Version: 1, Network: spec.Network{Mode: spec.NetworkDenyAll}}
	missing := ProbeResult{ProbeMissing, "absent"}
	unknown := ProbeResult{ProbeUnknown, "cannot probe: needs root"}
	notRoot := with(allOK(), map[string]ProbeResult{probeNftSocket: unknown, probeNflog: unknown, probeTable: unknown})
	notRoot.Root = false

	cases := []struct {
		name     string
		c        *spec.Contract
		host     HostFacts
		verdict  string
		exit     int
		statuses map[string]string
	}{
		{"all verified", full, allOK(), StatusEnforceable, ExitOK,
			map[string]string{"network": StatusEnforceable, "capabilities": StatusEnforceable, "deadline": StatusEnforceable, "products": StatusEnforceable}},
		{"no nft socket", full, with(allOK(), map[string]ProbeResult{probeNftSocket: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"network": StatusObservedOnly, "products": StatusEnforceable}},
		{"no nflog", full, with(allOK(), map[string]ProbeResult{probeNflog: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"network": StatusObservedOnly}},
		{"no overlay", full, with(allOK(), map[string]ProbeResult{probeOverlay: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"network": StatusEnforceable, "products": StatusObservedOnly}},
		{"overlay unknown", full, with(allOK(), map[string]ProbeResult{probeOverlay: unknown}), StatusUnverified, ExitObserved,
			map[string]string{"products": StatusUnverified}},
		{"no overlay but no products", bare, with(allOK(), map[string]ProbeResult{probeOverlay: missing}), StatusEnforceable, ExitOK,
			map[string]string{"products": StatusNotGranted, "deadline": StatusNotGranted}},
		{"no cgroup2", full, with(allOK(), map[string]ProbeResult{probeCgroup2: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"network": StatusObservedOnly, "deadline": StatusObservedOnly, "products": StatusObservedOnly, "capabilities": StatusEnforceable}},
		{"not root never claims enforcement", full, notRoot, StatusUnverified, ExitObserved,
			map[string]string{"network": StatusUnverified, "products": StatusEnforceable}},
		{"missing beats unknown", full, with(notRoot, map[string]ProbeResult{probeOverlay: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"network": StatusUnverified, "products": StatusObservedOnly}},
		{"runc without seccomp", full, with(allOK(), map[string]ProbeResult{probeSeccomp: missing}), StatusObservedOnly, ExitObserved,
			map[string]string{"seccomp": StatusObservedOnly, "network": StatusEnforceable, "spec": StatusEnforceable}},
		{"probe absent from facts", full, HostFacts{Root: true, Probes: map[string]ProbeResult{}}, StatusUnverified, ExitObserved,
			map[string]string{"network": StatusUnverified}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := buildAudit(tc.c, "sha256:x", tc.host)
			if len(rep.NotEnforced) != 1 || rep.NotEnforced[0].Name != "abstract_unix" || rep.NotEnforced[0].Status != StatusObservedOnly {
				t.Errorf("not_enforced %+v: abstract AF_UNIX sockets of shared netns must be declared", rep.NotEnforced)
			}
			if rep.Verdict != tc.verdict || rep.ExitCode != tc.exit {
				t.Errorf("verdict %s exit %d, want %s exit %d", rep.Verdict, rep.ExitCode, tc.verdict, tc.exit)
			}
			got := map[string]string{}
			for _, c := range rep.Controls {
				got[c.Name] = c.Status
			}
			for name, want := range tc.statuses {
				if got[name] != want {
					t.Errorf("control %s: %s, want %s", name, got[name], want)
				}
			}
		})
	}
}

func TestAuditCommand(t *testing.T) {
	design := contrib(t, "offline-structured-result.json")
	exact := contrib(t, "allow-exact.json")

	std().run(t, "boundary", "audit", "--contract", design).want(t, ExitOK,
		[]string{"deny_all, loopback deny", "out/result.json", "15m", "network", "enforceable", "verdict: enforceable (exit 0)"}, nil)
	std().run(t, "boundary", "audit", "--contract", exact).want(t, ExitOK,
		[]string{"allow 192.0.2.10 tcp/443", "allow 2001:db8::10 tcp/443"}, nil)

	h := std()
	h.probe = fakeProbe(with(allOK(), map[string]ProbeResult{probeNftSocket: {ProbeMissing, "refused"}}))
	h.run(t, "boundary", "audit", "--contract", design).want(t, ExitObserved,
		[]string{"observed_only", "verdict: observed_only (exit 3)"}, []string{"gensee: boundary audit: not every granted control", "network (observed_only)"})

	bad := writeFile(t, t.TempDir(), "bad.json", `{"id":"c","version":1,"network":{"mode":"allow_exact","allow":[{"ip":"example.com","proto":"tcp","port":443}]}}`)
	std().run(t, "boundary", "audit", "--contract", bad).want(t, ExitRefused, []string{"network.allow[0].ip: "}, nil)
	// With --json, stdout stays JSON-only: findings go to stderr.
	r := std().run(t, "boundary", "audit", "--contract", bad, "--json")
	r.want(t, ExitRefused, nil, []string{"network.allow[0].ip: "})
	if r.stdout != "" {
		t.Errorf("stdout with --json on an invalid contract: %q", r.stdout)
	}
}

func TestAuditJSONIsStableAndSorted(t *testing.T) {
	r := std().run(t, "boundary", "audit", "--contract", contrib(t, "allow-exact.json"), "--json")
	r.want(t, ExitOK, nil, nil)
	var rep AuditReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, r.stdout)
	}
	if rep.Schema != AuditSchema || rep.Contract.ID != "allow-exact" || len(rep.Grants.Network.Allow) != 2 || rep.Grants.Network.Loopback != "deny" {
		t.Errorf("unexpected report: %+v", rep)
	}
	// Keys are sorted: re-encoding canonically and indenting gives the same text.
	var again bytes.Buffer
	if err := writeJSON(&again, rep); err != nil {
		t.Fatal(err)
	}
	if again.String() != r.stdout {
		t.Errorf("--json output is not canonical:\n%s\nwant\n%s", r.stdout, again.String())
	}
	// Two runs are byte-identical.
	if r2 := std().run(t, "boundary", "audit", "--contract", contrib(t, "allow-exact.json"), "--json"); r2.stdout != r.stdout {
		t.Error("two runs differ")
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "contract", "grants", "controls", "host", "verdict", "exit_code"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
}

func TestOverlayResult(t *testing.T) {
	cases := []struct {
		name       string
		fs         string
		err        error
		dep        string
		wantResult string
	}{
		{"registered", "nodev\tcgroup2\nnodev\toverlay\n\text4\n", nil, "", ProbeOK},
		{"module not loaded", "\text4\n", nil, "kernel/fs/overlayfs/overlay.ko:\n", ProbeUnknown},
		{"absent", "\text4\nnodev\toverlayfs-not\n", nil, "", ProbeMissing},
		{"unreadable", "", errors.New("EPERM"), "", ProbeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := overlayResult([]byte(tc.fs), tc.err, []byte(tc.dep)); got.Result != tc.wantResult {
				t.Errorf("%+v, want %s", got, tc.wantResult)
			}
		})
	}
}
