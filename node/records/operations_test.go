package records

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

const opID = "0123456789abcdef0123456789abcdef"

func (f *fixture) writeJSON(name string, v any) {
	f.t.Helper()
	if err := f.st.WriteJSON(opID, name, v); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) event(kind string) {
	b, _ := json.Marshal(spec.Event{Kind: kind, Control: "network", Target: "10.0.0.1:443", At: t0, OperationID: opID})
	dir, _ := f.st.OperationDir(opID)
	f.appendRaw(filepath.Join(dir, record.EventsFile), string(b)+"\n")
}

func kinds(recs []Record) map[string]int {
	n := map[string]int{}
	for _, r := range recs {
		switch r.(type) {
		case Admission:
			n["admission"]++
		case EgressDenied:
			n["egress"]++
		case Gate:
			n["gate"]++
		case Finding:
			n["finding"]++
		}
	}
	return n
}

// TestOperationRecords: an operation is reported admitted once bound,
// its egress denials as they are appended, its gate verdicts per product
// class once the manifest exists, its findings one by one; a restart
// repeats none; a removed operation is forgotten.
func TestOperationRecords(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.CreateOperation(opID, "k8s.io", "c1"); err != nil {
		t.Fatal(err)
	}
	pod := &spec.KubernetesRef{Namespace: "team-a", Pod: "web-0", PodUID: "u1", Container: "app"}
	adm := spec.Admission{OperationID: opID, Namespace: "k8s.io", ContainerID: "c1", Kubernetes: pod,
		AdmissionDecision: spec.AdmissionDecision{Selector: "ci", ContractID: "build", SafeDefault: true, FallbackFrom: "no_inference",
			Contract: spec.Contract{ID: "build", Products: []spec.Product{{Class: "structured_result", Slot: "out/result.json"}, {Class: "blob_set", Slot: "out/blobs"}}}}}
	f.writeJSON(record.AdmissionFile, adm)
	f.event(spec.EventEgressDenied)
	f.event(spec.EventHintLoop)
	if got := kinds(f.poll()); got["admission"] != 0 || got["egress"] != 1 {
		t.Fatalf("before the bind: %v, want one egress denial and no admission", got)
	}
	adm.Subject = &spec.Subject{InitPID: 1}
	adm.Timing = &spec.AdmissionTiming{AdmitMS: 20, BindMS: 5}
	f.writeJSON(record.AdmissionFile, adm)
	recs := f.poll()
	if len(recs) != 1 {
		t.Fatalf("bound: %v, want one admission", recs)
	}
	a := recs[0].(Admission)
	if a.Reason != "safe_default" || a.Op.Selector != "ci" || a.Op.Contract != "build" || a.Op.Pod == nil || a.Op.Pod.Pod != "web-0" || a.Timing.BindMS != 5 {
		t.Fatalf("admission %+v", a)
	}
	f.reopen()
	f.event(spec.EventEgressDenied)
	f.writeJSON(record.ManifestFile, spec.Manifest{OperationID: opID,
		Gate:     spec.GateResult{Verdict: spec.VerdictFail, Violations: []spec.Violation{{Slot: "out/blobs", Rule: "max_bytes", Detail: "too big"}}},
		Products: []spec.ProductRecord{{Class: "structured_result", Slot: "out/result.json", Verdict: spec.VerdictPass}}})
	recs = f.poll()
	if got := kinds(recs); got["egress"] != 1 || got["gate"] != 1 || got["admission"] != 0 {
		t.Fatalf("after a restart: %v, want one egress denial and the gate", got)
	}
	for _, r := range recs {
		if g, ok := r.(Gate); ok {
			want := []ClassVerdict{{"structured_result", "pass"}, {"blob_set", "fail"}}
			if g.Verdict != spec.VerdictFail || len(g.Classes) != 2 || g.Classes[0] != want[0] || g.Classes[1] != want[1] || g.Op.Pod.Pod != "web-0" {
				t.Fatalf("gate %+v, want %v", g, want)
			}
		}
	}
	raise := func(sig string) {
		if _, err := events.RaiseAttention(f.st, opID, spec.Finding{Signature: sig, Detail: "d", At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	raise("deny_then_reach")
	if got := kinds(f.poll()); got["finding"] != 1 {
		t.Fatalf("%v, want one finding", got)
	}
	f.reopen()
	raise("table_tampered")
	recs = f.poll()
	if len(recs) != 1 || recs[0].(Finding).Finding.Signature != "table_tampered" {
		t.Fatalf("%v, want the second finding only", recs)
	}
	if got := f.poll(); len(got) != 0 {
		t.Fatalf("nothing new: %v", got)
	}
	dir, _ := f.st.OperationDir(opID)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	f.poll()
	if len(f.r.cur.Operations) != 0 {
		t.Fatalf("a removed operation is still in the cursor: %v", f.r.cur.Operations)
	}
}

// TestGateNoProducts: a contract without products reports the gate's
// overall verdict under NoClass.
func TestGateNoProducts(t *testing.T) {
	g := gateOf(Operation{}, spec.Contract{}, &spec.Manifest{Gate: spec.GateResult{Verdict: spec.VerdictNotRun}}, t0)
	if len(g.Classes) != 1 || g.Classes[0] != (ClassVerdict{NoClass, spec.VerdictNotRun}) {
		t.Fatalf("%+v", g.Classes)
	}
}

// TestMalformedManifest: a manifest that does not parse is counted once
// and never stops the operation's other records.
func TestMalformedManifest(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.CreateOperation(opID, "k8s.io", "c1"); err != nil {
		t.Fatal(err)
	}
	f.writeJSON(record.AdmissionFile, spec.Admission{OperationID: opID, Subject: &spec.Subject{InitPID: 1}})
	dir, _ := f.st.OperationDir(opID)
	if err := os.WriteFile(filepath.Join(dir, record.ManifestFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.event(spec.EventEgressDenied)
	if got := kinds(f.poll()); got["admission"] != 1 || got["egress"] != 1 || got["gate"] != 0 {
		t.Fatalf("%v, want the admission and the denial", got)
	}
	f.poll()
	if f.r.Malformed != 1 {
		t.Fatalf("malformed %d, want 1", f.r.Malformed)
	}
}
