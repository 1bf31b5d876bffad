package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// TestRefusals: every refusal reaches ctr's error with its reason, nothing
// of the image runs (the host listener it would call is never contacted)
// and nothing is left behind (checked when the environment stops).
func TestRefusals(t *testing.T) {
	cat := catalogOf([]spec.Contract{loopbackOK("loopback-ok")},
		selector("it-strict", map[string]string{"build": "loopback-ok"}, ""))
	e := startEnv(t, cat)
	l, addr := hostListener(t)
	args := []string{"/bin/probe", "connect", "tcp", addr}
	obs := e.observation(args, hostEnv(t))
	host := []string{"--net-host"}
	anno := func(v string) []string { return append(host, "--annotation", "io.gensee.boundary.inference="+v) }

	// Positive control first: a valid inference is admitted and connects, so
	// the listener would see any image that ran.
	out, code := e.run("it-strict", "admitted", anno(e.inference(obs, nil, nil)), args...)
	if code != 0 || l.accepted.Load() != 1 {
		t.Fatalf("admitted run: exit %d accepted %d\n%s", code, l.accepted.Load(), out)
	}
	if got := e.admissionRecord("it-strict", "admitted")["observation_digest"]; got != mustDigest(t, obs) {
		t.Fatalf("runtime derived observation %v, test computed %v", got, mustDigest(t, obs))
	}

	cases := []struct {
		name, ns string
		flags    []string
		reason   string
	}{
		{"no selector", "it-nomatch", anno(e.inference(obs, nil, nil)), "no_selector"},
		{"no inference", "it-strict", host, "no_inference"},
		{"tie", "it-strict", anno(e.inference(obs, func(i *spec.Inference) {
			i.Candidates = []spec.Candidate{{Class: "build", ConfidenceBP: 9000}, {Class: "fetch", ConfidenceBP: 9000}}
		}, nil)), "tie_or_low_margin"},
		{"low confidence", "it-strict", anno(e.inference(obs, func(i *spec.Inference) {
			i.Candidates = []spec.Candidate{{Class: "build", ConfidenceBP: 7000}}
		}, nil)), "low_confidence"},
		{"novel class", "it-strict", anno(e.inference(obs, func(i *spec.Inference) {
			i.Candidates = []spec.Candidate{{Class: "deploy", ConfidenceBP: 9900}}
		}, nil)), "novel_class"},
		{"expired inference", "it-strict", anno(e.inference(obs, func(i *spec.Inference) {
			i.IssuedAt, i.ExpiresAt = time.Now().Add(-50*time.Minute), time.Now().Add(-time.Minute)
		}, nil)), "expired"},
		{"observation mismatch", "it-strict", anno(e.inference(e.observation([]string{"/bin/probe", "sleep", "1"}, hostEnv(t)), nil, nil)), "observation_mismatch"},
		{"foreign analyzer key", "it-strict", anno(e.inference(obs, nil, newKey(t))), "bad_signature"},
	}
	for _, tc := range cases {
		out, code := e.run(tc.ns, "refused", tc.flags, args...)
		if code == 0 {
			t.Fatalf("%s: ran, want refused\n%s", tc.name, out)
		}
		if !strings.Contains(out, "gensee: admission refused") || !strings.Contains(out, tc.reason) {
			t.Errorf("%s: ctr error does not carry the refusal %q:\n%s", tc.name, tc.reason, out)
		}
		if l.accepted.Load() != 1 {
			t.Fatalf("%s: the refused image reached the listener", tc.name)
		}
	}

	{ // a catalog signed by a key other than the anchor's
		good := e.key
		e.key = newKey(t)
		e.publish(cat)
		e.key = good
		out, code := e.run("it-strict", "refused", anno(e.inference(obs, nil, nil)), args...)
		if code == 0 || !strings.Contains(out, "catalog") || !strings.Contains(out, "signature") {
			t.Fatalf("want a catalog signature refusal, got exit %d\n%s", code, out)
		}
		if l.accepted.Load() != 1 {
			t.Fatalf("the refused image reached the listener")
		}
		e.publish(cat) // a higher version, signed by the anchor key again
	}
}

func mustDigest(t *testing.T, o spec.Observation) string {
	d, err := o.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
