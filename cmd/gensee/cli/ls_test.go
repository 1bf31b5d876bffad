package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLs(t *testing.T) {
	f := newStateFixture(t, "")
	done := f.add(t, recSpec{ns: "default", container: "build-1", contract: "ci-builds", verdict: "pass", age: 3 * 24 * time.Hour, deleted: true})
	running := f.add(t, recSpec{ns: "k8s.io", container: "web2", contract: "serve", age: -1})
	flagged := f.add(t, recSpec{ns: "k8s.io", container: "job", contract: "deny-all", verdict: "fail", age: time.Hour, attention: true})

	r := f.run(t, "ls")
	r.want(t, ExitOK, []string{"OPERATION", "CONTAINER", "CONTRACT", "VERDICT", "ATTENTION", "AGE",
		done, "default/build-1", "ci-builds", "pass", "3d", running, "k8s.io/web2", "running", flagged, "deny-all", "fail", "SET"}, nil)
	if strings.Index(r.stdout, running) > strings.Index(r.stdout, done) {
		t.Errorf("not newest first:\n%s", r.stdout)
	}

	r = f.run(t, "ls", "-q")
	if lines := strings.Fields(r.stdout); len(lines) != 3 || lines[0] != running {
		t.Fatalf("ls -q:\n%s", r.stdout)
	}

	// -n before or after the command, or $CONTAINERD_NAMESPACE.
	for _, args := range [][]string{{"-n", "default", "ls", "-q"}, {"ls", "-q", "--namespace", "default"}} {
		r = f.run(t, args...)
		if strings.TrimSpace(r.stdout) != done {
			t.Errorf("%v: %q, want only %s", args, r.stdout, done)
		}
	}
	h := std()
	h.env = map[string]string{EnvNamespace: "default"}
	if r = h.run(t, "ls", "-q", "--config", f.config); strings.TrimSpace(r.stdout) != done {
		t.Errorf("$%s=default: %q", EnvNamespace, r.stdout)
	}

	for _, flag := range []string{"--json", "--format=json"} {
		r = f.run(t, "ls", flag, "-n", "k8s.io")
		var items []LsItem
		if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 2 {
			t.Fatalf("%s: %v\n%s", flag, err, r.stdout)
		}
		if items[1].OperationID != flagged || !items[1].Attention || items[1].State != "exited" || items[1].FinishedAt == nil {
			t.Errorf("%s: %+v", flag, items[1])
		}
		if items[0].State != "running" || items[0].FinishedAt != nil {
			t.Errorf("%s: %+v", flag, items[0])
		}
	}
	f.run(t, "ls", "-q", "--json").want(t, ExitUsage, nil, []string{"exclude each other"})
	f.run(t, "ls", "--format", "yaml").want(t, ExitUsage, nil, []string{"want json or table"})
}

func TestLsEmpty(t *testing.T) {
	f := newStateFixture(t, "")
	f.run(t, "ls").want(t, ExitOK, []string{"OPERATION"}, nil)
	if r := f.run(t, "ls", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("%q", r.stdout)
	}
}
