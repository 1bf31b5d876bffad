package kubeevents

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/gensee/gensee/node/records"
	"github.com/gensee/gensee/spec"
)

var pod = &spec.KubernetesRef{Namespace: "team-a", Pod: "web-0", PodUID: "uid-1", Container: "app"}

func newPoster(t *testing.T, egress bool, burst int) (*Poster, *fake.Clientset) {
	t.Helper()
	c := fake.NewClientset()
	p := New(context.Background(), Config{Client: c, Node: "node-1", Egress: egress, Correlator: record.CorrelatorOptions{BurstSize: burst}})
	t.Cleanup(p.Shutdown)
	return p, c
}

// posted waits until the posted Events settle (nothing new for 300 ms,
// at most 5 s) and returns them.
func posted(t *testing.T, c *fake.Clientset, atLeast int) []corev1.Event {
	t.Helper()
	var last []corev1.Event
	stable := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == len(last) && len(l.Items) >= atLeast && sameCounts(l.Items, last) {
			if stable++; stable == 6 {
				return l.Items
			}
		} else {
			stable = 0
		}
		last = l.Items
	}
	return last
}

func sameCounts(a, b []corev1.Event) bool {
	n := 0
	for _, e := range a {
		n += int(e.Count)
	}
	for _, e := range b {
		n -= int(e.Count)
	}
	return n == 0
}

func refusal(at time.Time) records.Refusal {
	return records.Refusal{RefusalRecord: spec.RefusalRecord{At: at, Namespace: "k8s.io", ContainerID: "c1", Reason: "no_selector",
		Message: "no selector matches namespace team-a", Fix: "add a selector for it to the catalog", Kubernetes: pod}}
}

// TestPostRefusal: a refusal becomes one Warning Event on the pod (kind,
// namespace, name, uid, the container's field path) naming the reason and
// the fix; the same refusal again is counted on it, not posted twice.
func TestPostRefusal(t *testing.T) {
	p, c := newPoster(t, false, 0)
	now := time.Now()
	for range 2 {
		if !p.Post(refusal(now)) {
			t.Fatal("refusal not posted")
		}
	}
	evs := posted(t, c, 1)
	if len(evs) != 1 {
		t.Fatalf("%d Events, want 1 (deduplicated): %+v", len(evs), evs)
	}
	e := evs[0]
	o := e.InvolvedObject
	if o.Kind != "Pod" || o.Namespace != "team-a" || o.Name != "web-0" || o.UID != "uid-1" || o.FieldPath != "spec.containers{app}" || e.Namespace != "team-a" {
		t.Errorf("involvedObject %+v in namespace %s", o, e.Namespace)
	}
	if e.Type != corev1.EventTypeWarning || e.Reason != ReasonAdmissionRefused || e.Count != 2 || e.Source.Component != Component || e.Source.Host != "node-1" {
		t.Errorf("event %s %s count %d source %+v", e.Type, e.Reason, e.Count, e.Source)
	}
	for _, s := range []string{"container app", "no_selector", "add a selector"} {
		if !strings.Contains(e.Message, s) {
			t.Errorf("message %q lacks %q", e.Message, s)
		}
	}
}

// TestPostRateLimited: a flood of egress denials on one pod is held to
// the burst, and a finding after it still gets through (its own bucket);
// egress denials are not posted unless asked for.
func TestPostRateLimited(t *testing.T) {
	p, c := newPoster(t, true, 5)
	now := time.Now()
	op := records.Operation{ID: "op1", Contract: "build", Pod: pod}
	for i := range 40 {
		p.Post(records.EgressDenied{Op: op, Event: spec.Event{Kind: spec.EventEgressDenied, Target: fmt.Sprintf("10.0.0.%d:443", i), At: now}})
	}
	p.Post(records.Finding{Op: op, Finding: spec.Finding{Signature: "deny_then_reach", Detail: "10.0.0.1:443 was reached", At: now}})
	evs := posted(t, c, 2)
	var egress, writes int
	var finding bool
	for _, e := range evs {
		switch e.Reason {
		case ReasonEgressDenied:
			egress++
			writes += int(e.Count)
		case ReasonControlDefeat:
			finding = strings.Contains(e.Message, "deny_then_reach")
		}
	}
	if egress == 0 || writes > 5 {
		t.Errorf("%d egress Events, %d writes: want at most the burst of 5", egress, writes)
	}
	if !finding {
		t.Errorf("the finding was not posted after the flood: %+v", evs)
	}

	q, _ := newPoster(t, false, 0)
	if q.Post(records.EgressDenied{Op: op, Event: spec.Event{At: now}}) {
		t.Error("an egress denial was posted without --egress-events")
	}
}

// TestPostFilters: records of no pod, stale records, passed gates and
// admissions make no Event; a failed gate does.
func TestPostFilters(t *testing.T) {
	p, _ := newPoster(t, true, 0)
	now := time.Now()
	noPod := refusal(now)
	noPod.Kubernetes = nil
	for name, r := range map[string]records.Record{
		"no pod":     noPod,
		"stale":      refusal(now.Add(-2 * time.Hour)),
		"gate pass":  records.Gate{Op: records.Operation{Pod: pod}, At: now, Verdict: spec.VerdictPass},
		"admission":  records.Admission{Op: records.Operation{Pod: pod}, At: now},
		"sandbox ok": records.Gate{Op: records.Operation{Pod: &spec.KubernetesRef{Namespace: "a", Pod: "b"}}, At: now, Verdict: spec.VerdictNotRun},
	} {
		if p.Post(r) {
			t.Errorf("%s: posted", name)
		}
	}
	g := records.Gate{Op: records.Operation{ID: "op1", Contract: "build", Pod: pod}, At: now, Verdict: spec.VerdictFail,
		Classes:    []records.ClassVerdict{{Class: "structured_result", Verdict: "fail"}},
		Violations: []spec.Violation{{Slot: "out/result.json", Rule: "schema", Detail: "not an object"}}}
	ev, ok := For(g, false)
	if !ok || ev.Reason != ReasonGateFailed || !strings.Contains(ev.Message, "structured_result failed") || !strings.Contains(ev.Message, "out/result.json schema: not an object") {
		t.Errorf("gate Event %+v", ev)
	}
	// A long refusal keeps its fix whole (each part redacted apart, the
	// whole cut at maxMessage only), and a secret in it is redacted.
	long := refusal(now)
	long.Message = strings.Repeat("m", 280) + " password=hunter2"
	long.Fix = "attach an analyzer's signed inference for observation sha256:" + strings.Repeat("c", 64) + `, or give selector "k8s-strict" a safe_default`
	if ev, ok := For(long, false); !ok || !strings.Contains(ev.Message, long.Fix) || strings.Contains(ev.Message, "hunter2") {
		t.Errorf("long refusal message %q", ev.Message)
	}
	if got := truncate(strings.Repeat("é", 600), maxMessage); len(got) > maxMessage || !strings.HasSuffix(got, "...") {
		t.Errorf("truncate: %d bytes", len(got))
	}
}
