package service

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/specpolicy"
)

// TestRecordExec checks that each exec's admission record is a line of
// execs.jsonl naming the exec, its labels, its rlimits and those taken
// from the init, and that the file stops growing at its bound without
// refusing the exec.
func TestRecordExec(t *testing.T) {
	dir := t.TempDir()
	op := &operation{id: "0123456789abcdef0123456789abcdef", store: record.Store{Dir: dir}}
	opDir, _ := op.store.OperationDir(op.id)
	if err := os.MkdirAll(opDir, 0o700); err != nil {
		t.Fatal(err)
	}
	bound := specpolicy.ExecBound{ApparmorProfile: "cri-containerd.apparmor.d", Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}}, RlimitsFromInit: []string{"RLIMIT_NOFILE"}}
	for _, id := range []string{"probe-1", "../x"} {
		if err := op.recordExec(id, []string{"CAP_NET_RAW (bounding)"}, bound); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(opDir, execsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var a execAdmission
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		if a.ApparmorProfile != bound.ApparmorProfile || len(a.Rlimits) != 1 || a.RlimitsFromInit[0] != "RLIMIT_NOFILE" || !a.NoNewPrivileges || len(a.CapabilitiesRemoved) != 1 {
			t.Errorf("record %+v", a)
		}
		ids = append(ids, a.ExecID)
	}
	if strings.Join(ids, ",") != "probe-1,../x" {
		t.Errorf("records of %q", ids)
	}
	if err := os.Truncate(filepath.Join(opDir, execsFile), maxExecsBytes-10); err != nil {
		t.Fatal(err)
	}
	if err := op.recordExec("probe-2", nil, bound); err != nil {
		t.Errorf("a full record file refused the exec: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(opDir, execsFile)); st.Size() != maxExecsBytes-10 {
		t.Errorf("the record file grew past its bound: %d", st.Size())
	}
}
