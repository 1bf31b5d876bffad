package admission

import (
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

// podVolatile is the volatile_env a Kubernetes selector lists: CRI's
// HOSTNAME and the kubelet's Service links, plus two patterns that would
// cover protected names (PATH, LD_PRELOAD), which stay in the digest.
var podVolatile = []string{"HOSTNAME", "*_SERVICE_HOST", "*_PORT*", "*PATH", "*PRELOAD"}

// volatileFixture is fx's catalog with pods-a (team-a's pods) listing
// podVolatile, naming ref-analyzer and falling back to readonly.
func volatileFixture(t *testing.T, fx *fixture) *spec.Catalog {
	t.Helper()
	n := withoutSelector(fx.cat, "k8s-any")
	for i := range n.Selectors {
		if n.Selectors[i].ID == "pods-a" {
			n.Selectors[i].VolatileEnv = podVolatile
			n.Selectors[i].SafeDefault = "readonly"
			n.Selectors[i].Analyzer = &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: analyzerSock, Timeout: "200ms"}
		}
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	return n
}

// pod is the input of a team-a pod whose process has env, as CRI wrote it.
func pod(t *testing.T, fx *fixture, cat *spec.Catalog, env ...string) Input {
	t.Helper()
	cmd := spec.Command{Args: []string{"/app/server", "--port=8080"}, Env: env, Cwd: "/app"}
	obs := fx.obs
	var err error
	if obs.CommandDigest, err = cmd.Digest(); err != nil {
		t.Fatal(err)
	}
	in := fx.input(factsTeamA, nil)
	in.Catalog, in.Observation, in.Command = cat, obs, cmd
	return in
}

func replica(hostname, dbHost string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOSTNAME=" + hostname, "APP_MODE=prod",
		"DB_SERVICE_HOST=" + dbHost, "DB_SERVICE_PORT=5432", "DB_PORT=tcp://" + dbHost + ":5432", "DB_PORT_5432_TCP_ADDR=" + dbHost}
}

func TestVolatileEnv(t *testing.T) {
	fx := newFixture(t)
	cat := volatileFixture(t, fx)
	decide := func(in Input) Decision {
		t.Helper()
		a := &fakeAsker{outcome: spec.ConsultNoClass, detail: "novel"}
		in.Ask = a.ask
		d := Decide(in)
		if !d.Admitted || d.ObservationDigest == "" || a.calls != 1 || a.digest != d.ObservationDigest {
			t.Fatalf("decision %s (%s), asked %d times about %s", d.Reason, d.Message, a.calls, a.digest)
		}
		for _, e := range a.cmd.Env { // the analyzer is told the stable command
			if name, _, _ := strings.Cut(e, "="); slices.Contains(d.Observation.VolatileEnv, name) {
				t.Errorf("the analyzer was told %s", e)
			}
		}
		return d
	}
	one := decide(pod(t, fx, cat, replica("web-7d9f8c-abcde", "10.96.0.10")...))
	two := decide(pod(t, fx, cat, replica("web-7d9f8c-xyz12", "10.96.7.7")...))
	want := []string{"DB_PORT", "DB_PORT_5432_TCP_ADDR", "DB_SERVICE_HOST", "DB_SERVICE_PORT", "HOSTNAME"}
	if !slices.Equal(one.Observation.VolatileEnv, want) {
		t.Fatalf("left out %v, want %v", one.Observation.VolatileEnv, want)
	}
	if one.ObservationDigest != two.ObservationDigest || one.Observation.CommandDigest != two.Observation.CommandDigest {
		t.Fatalf("two replicas differing in volatile values only: %s / %s", one.ObservationDigest, two.ObservationDigest)
	}
	raw := pod(t, fx, cat, replica("web-7d9f8c-abcde", "10.96.0.10")...)
	if one.Observation.CommandDigest == raw.Observation.CommandDigest {
		t.Error("the stable command digest is the raw one")
	}

	// PATH, LD_PRELOAD (patterns *PATH, *PRELOAD match them) and any
	// name no pattern lists stay bound.
	for name, env := range map[string][]string{
		"PATH":       withPath(replica("web-7d9f8c-abcde", "10.96.0.10"), "PATH=/tmp/evil:/usr/bin"),
		"LD_PRELOAD": append(replica("web-7d9f8c-abcde", "10.96.0.10"), "LD_PRELOAD=/tmp/evil.so"),
		"APP_MODE":   append(replica("web-7d9f8c-abcde", "10.96.0.10"), "APP_MODE=debug"),
	} {
		d := decide(pod(t, fx, cat, env...))
		if d.Observation.CommandDigest == one.Observation.CommandDigest || slices.Contains(d.Observation.VolatileEnv, name) {
			t.Errorf("%s: left out of the digest (%v)", name, d.Observation.VolatileEnv)
		}
	}

	// A pod that sets a listed variable itself is left out too: the
	// selector says whose values are not bound, not who set them. A
	// name the other replicas lack changes the observation (its names
	// are recorded), not the command digest.
	own := decide(pod(t, fx, cat, append(replica("web-7d9f8c-abcde", "10.96.0.10"), "HOSTNAME=spoofed")...))
	if own.ObservationDigest != one.ObservationDigest {
		t.Error("a pod's own HOSTNAME is bound")
	}
	extra := decide(pod(t, fx, cat, append(replica("web-7d9f8c-abcde", "10.96.0.10"), "EVIL_SERVICE_HOST=attacker.example")...))
	if extra.Observation.CommandDigest != one.Observation.CommandDigest || extra.ObservationDigest == one.ObservationDigest ||
		!slices.Contains(extra.Observation.VolatileEnv, "EVIL_SERVICE_HOST") {
		t.Errorf("an extra Service link: command %s, observation %s, left out %v", extra.Observation.CommandDigest, extra.ObservationDigest, extra.Observation.VolatileEnv)
	}
}

// TestVolatileInferenceCoversReplicas: one inference, made for the
// stable observation, admits every replica under the routed contract.
func TestVolatileInferenceCoversReplicas(t *testing.T) {
	fx := newFixture(t)
	cat := volatileFixture(t, fx)
	first := Decide(pod(t, fx, cat, replica("web-7d9f8c-abcde", "10.96.0.10")...))
	env := fx.env(t, func(i *spec.Inference) { i.ObservationDigest = first.ObservationDigest })
	in := pod(t, fx, cat, replica("web-7d9f8c-xyz12", "10.96.7.7")...)
	in.InferenceEnvelope = env
	d := Decide(in)
	checkShape(t, d)
	if !d.Admitted || d.ContractID != "offline" || d.SafeDefault || d.Analyzer != nil {
		t.Fatalf("replica: %s (%s)", d.Reason, d.Message)
	}
	// The same inference does not admit a pod whose PATH differs.
	in = pod(t, fx, cat, withPath(replica("web-7d9f8c-xyz12", "10.96.7.7"), "PATH=/tmp")...)
	in.InferenceEnvelope = env
	if d := Decide(in); d.Reason != ReasonObservationMismatch {
		t.Fatalf("another PATH: %s", d.Reason)
	}
}

// TestVolatileNeedsTheCommand: a door that passes no command (or another
// one) is refused when the selector lists volatile_env, never decided on
// an unstabilized digest.
func TestVolatileNeedsTheCommand(t *testing.T) {
	fx := newFixture(t)
	cat := volatileFixture(t, fx)
	in := pod(t, fx, cat, replica("a", "10.0.0.1")...)
	in.Command = spec.Command{}
	if d := Decide(in); d.Admitted || d.Reason != ReasonObservationInvalid {
		t.Fatalf("no command: %s", d.Reason)
	}
	in = pod(t, fx, cat, replica("a", "10.0.0.1")...)
	in.Command.Env = append(in.Command.Env, "X=1")
	if d := Decide(in); d.Admitted || d.Reason != ReasonObservationInvalid {
		t.Fatalf("another command: %s", d.Reason)
	}
}

// withPath is env with its first entry (PATH) replaced by path.
func withPath(env []string, path string) []string {
	env[0] = path
	return env
}
