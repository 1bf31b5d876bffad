package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/shim/events"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

func TestBuildOperationAudit(t *testing.T) {
	at := evAt.Add(time.Minute)
	unbound := spec.Event{Kind: spec.EventPolicyUnbound, Control: "network", Target: "198.51.100.7:80/tcp", At: evAt}
	walls := events.Contents{Events: []spec.Event{denial(0, "198.51.100.7:80/tcp"), denial(1, "198.51.100.7:80/tcp"), hintLoop(1)}}
	withDefeat := events.Contents{Events: append(append([]spec.Event{}, walls.Events...), defeatEvent(at))}
	att := spec.Attention{OperationID: fxOperation, State: spec.AttentionControlDefeat, Findings: []spec.Finding{defeatFinding(at)}}

	cases := []struct {
		name     string
		log      events.Contents
		att      spec.Attention
		attSet   bool
		verdict  string
		exit     int
		counts   map[string]int
		defeatSr []string // sources of the control_defeat finding
		m        *spec.Manifest
	}{
		{"walls and a hint loop held", walls, spec.Attention{}, false, ClassHitAWall, ExitOK,
			map[string]int{ClassHitAWall: 3}, nil, nil},
		{"nothing", events.Contents{}, spec.Attention{}, false, VerdictNothing, ExitOK, nil, nil, nil},
		{"policy_unbound alone is observed", events.Contents{Events: []spec.Event{unbound}}, spec.Attention{}, false, VerdictNothing, ExitOK,
			map[string]int{ClassObserved: 1}, nil, nil},
		{"attention only (event dropped)", walls, att, true, ClassDefeated, ExitDefeated,
			map[string]int{ClassHitAWall: 3, ClassDefeated: 1}, []string{"attention"}, nil},
		{"event only (attention cleared)", withDefeat, spec.Attention{}, false, ClassDefeated, ExitDefeated,
			map[string]int{ClassHitAWall: 3, ClassDefeated: 1}, []string{"events"}, nil},
		{"event and attention are one firing", withDefeat, att, true, ClassDefeated, ExitDefeated,
			map[string]int{ClassHitAWall: 3, ClassDefeated: 1}, []string{"events", "attention"}, nil},
		{"the manifest alone (log and attention lost)", events.Contents{}, spec.Attention{}, false, ClassDefeated, ExitDefeated,
			map[string]int{ClassDefeated: 1}, []string{"manifest"}, &spec.Manifest{Findings: []spec.Finding{defeatFinding(at)}}},
		{"events, attention and manifest are one firing", withDefeat, att, true, ClassDefeated, ExitDefeated,
			map[string]int{ClassHitAWall: 3, ClassDefeated: 1}, []string{"events", "attention", "manifest"}, &spec.Manifest{Findings: []spec.Finding{defeatFinding(at)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := buildOperationAudit(fxOperation, "", tc.log, true, tc.att, tc.attSet, tc.m)
			if rep.Verdict != tc.verdict || rep.ExitCode != tc.exit {
				t.Errorf("verdict %s exit %d, want %s %d", rep.Verdict, rep.ExitCode, tc.verdict, tc.exit)
			}
			for _, class := range []string{ClassHitAWall, ClassDefeated, ClassObserved} {
				if rep.Counts[class] != tc.counts[class] {
					t.Errorf("counts = %v, want %v", rep.Counts, tc.counts)
				}
			}
			for _, f := range rep.Findings {
				if f.Security != (f.Class == ClassDefeated) {
					t.Errorf("%s: security %v in class %s", f.Kind, f.Security, f.Class)
				}
				if f.Kind == spec.EventHintLoop && (f.Class != ClassHitAWall || !f.GuidanceGap || f.Security) {
					t.Errorf("hint_loop classified %+v, want a guidance gap that hit a wall", f)
				}
				if f.Class == ClassDefeated && strings.Join(f.Sources, ",") != strings.Join(tc.defeatSr, ",") {
					t.Errorf("defeat sources %v, want %v", f.Sources, tc.defeatSr)
				}
				if f.Class == ClassDefeated && (tc.attSet || tc.m != nil) && len(f.Evidence) != 2 {
					t.Errorf("defeat evidence %v, want 2 entries", f.Evidence)
				}
			}
		})
	}
}

func TestOperationAuditCommand(t *testing.T) {
	fx := newOpFixture(t)
	path := filepath.Join(fx.dir, record.EventsFile)
	appendEvents(t, path, denial(0, "198.51.100.7:80/tcp"), denial(1, "198.51.100.7:80/tcp"), hintLoop(1), denial(2, "198.51.100.7:80/tcp"))

	r := fx.run(t, "boundary", "audit", "--operation", fxOperation)
	r.want(t, ExitOK, []string{
		"operation " + fxOperation + " (" + fxNamespace + "/" + fxContainer + ")",
		"4 events in events.jsonl", "attention not set",
		"DEFEATED A CONTROL", "none: no control_defeat signature fired",
		"HIT A WALL", "egress_denied  network/deny_all  198.51.100.7:80/tcp", "(x3, first shown)",
		"hint_loop  watchdog/denial_loop", "guidance gap, not a security finding", "guidance (changes no decision): retrying",
		"verdict: hit_a_wall (exit 0)",
	}, nil)
	r = fx.run(t, "boundary", "audit", "--container", fxContainer, "--namespace", fxNamespace, "--json")
	var rep OperationAudit
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != ExitOK {
		t.Fatalf("audit --json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if rep.Schema != OperationAuditSchema || rep.Verdict != ClassHitAWall || len(rep.Findings) != 4 || !rep.Log.Complete {
		t.Errorf("audit --json = %+v", rep)
	}
	if again := fx.run(t, "boundary", "audit", "--operation", fxOperation, "--json"); again.stdout != r.stdout {
		t.Errorf("audit --json is not stable:\n%s\n---\n%s", r.stdout, again.stdout)
	}

	at := evAt.Add(time.Minute)
	appendEvents(t, path, defeatEvent(at))
	if _, err := events.RaiseAttention(record.Store{Dir: fx.state}, fxOperation, defeatFinding(at)); err != nil {
		t.Fatal(err)
	}
	r = fx.run(t, "boundary", "audit", "--operation", fxOperation)
	r.want(t, ExitDefeated, []string{
		"attention set (control_defeat)",
		"DEFEATED A CONTROL", "control_defeat  watchdog/deny_then_reach  198.51.100.7:80/tcp",
		"from events and attention; evidence: egress_denied 198.51.100.7:80/tcp; flow_reached 198.51.100.7:80/tcp",
		"HIT A WALL", "verdict: defeated_a_control (exit 4)",
	}, []string{"gensee: boundary audit: operation " + fxOperation + " defeated a control: deny_then_reach", "gensee attention clear --operation"})
	if strings.Count(r.stdout, "control_defeat  watchdog") != 1 {
		t.Errorf("one firing reported more than once:\n%s", r.stdout)
	}
	r = fx.run(t, "boundary", "audit", "--operation", fxOperation, "--json")
	rep = OperationAudit{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != ExitDefeated || rep.ExitCode != ExitDefeated || rep.Counts[ClassDefeated] != 1 {
		t.Fatalf("audit --json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
}

func TestOperationAuditUsage(t *testing.T) {
	std().run(t, "boundary", "audit", "--contract", "c.json", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"exclude each other"})
	std().run(t, "boundary", "audit").want(t, ExitUsage, nil, []string{"pass --contract F", "--operation ID"})
	std().run(t, "boundary", "audit", "--contract", contrib(t, "allow-exact.json"), "--namespace", "k8s.io").want(t, ExitUsage, nil, []string{"go with --operation"})
}

// The audit shows what the manifest counted for served ports, in text and
// JSON; without a manifest (a running task) there is no served section.
func TestOperationAuditServed(t *testing.T) {
	fx := newOpFixture(t)
	fx.m.Enforcement.Network.Serve = []spec.ServeRule{{Proto: "udp", Port: 53}}
	fx.m.Observation.Served = &spec.Served{Packets: 7, Bytes: 700, ReversePathDropped: 3,
		Ports: []spec.ServedCount{{Proto: "udp", Port: 53, Packets: 7, Bytes: 700}}}
	fx.writeManifest(t)
	fx.run(t, "boundary", "audit", "--operation", fxOperation).want(t, ExitOK, []string{
		"SERVED (inbound peers the table answered; not a finding)", "ports  53/udp",
		"7 reply packets / 700 bytes", "3 inbound packet(s) with a forged source dropped (reverse path)", "53/udp: 7 packets / 700 bytes",
	}, nil)
	r := fx.run(t, "boundary", "audit", "--operation", fxOperation, "--json")
	var rep OperationAudit
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Served == nil || len(rep.Served.Ports) != 1 || rep.Served.Counted == nil || rep.Served.Counted.ReversePathDropped != 3 {
		t.Errorf("served = %+v", rep.Served)
	}
	fx.m.Enforcement.Network.Serve, fx.m.Observation.Served = nil, nil
	fx.writeManifest(t)
	if r := fx.run(t, "boundary", "audit", "--operation", fxOperation); strings.Contains(r.stdout, "SERVED") {
		t.Errorf("a contract serving nothing shows a served section:\n%s", r.stdout)
	}
}
