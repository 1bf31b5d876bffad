package spec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// admission.json as each front door writes it decodes into Admission with
// no field left over, and keeps its keys when written again.
func TestAdmissionRecordsDecode(t *testing.T) {
	for name, rec := range map[string]string{
		"container": `{"operation_id":"0123456789abcdef0123456789abcdef","namespace":"default","container_id":"c1","created_at":"2026-12-01T10:00:00Z",
			"facts":{"containerd_namespace":"default","runtime":"io.containerd.gensee.v2"},
			"selector":"s","contract_id":"c","contract_digest":"sha256:00","contract":{"id":"c"},"safe_default":false,
			"catalog_version":3,"catalog_digest":"sha256:11","catalog_expires_at":"2027-01-01T00:00:00Z",
			"observation":{},"observation_digest":"sha256:22","capabilities_removed":["bounding"],
			"seccomp":{"profile_created":false},"netns":"private","table":"gensee_0123456789ab",
			"subject":{"init_pid":42,"start_time":7,"cgroup_path":"/default/c1","cgroup_id":9},"deadline":"10m"}`,
		"host run": `{"operation_id":"0123456789abcdef0123456789abcdef","namespace":"host","container_id":"0123456789abcdef0123456789abcdef","created_at":"2026-12-01T10:00:00Z",
			"facts":{"runtime":"host","user":"ci","uid":0},"selector":"s","contract_id":"c","contract_digest":"sha256:00","contract":{"id":"c"},
			"safe_default":true,"catalog_version":3,"catalog_digest":"sha256:11","catalog_expires_at":"2027-01-01T00:00:00Z",
			"observation":{},"observation_digest":"sha256:22",
			"command":{"args":["make"],"env":[],"cwd":"/src","executable":"/usr/bin/make","workspace":"/src"},"netns":"host"}`,
		"container, nothing removed": `{"operation_id":"0123456789abcdef0123456789abcdef","namespace":"default","container_id":"c1","created_at":"2026-12-01T10:00:00Z",
			"facts":{"containerd_namespace":"default","runtime":"io.containerd.gensee.v2"},
			"selector":"s","contract_id":"c","contract_digest":"sha256:00","contract":{"id":"c"},"safe_default":false,
			"catalog_version":3,"catalog_digest":"sha256:11","catalog_expires_at":"2027-01-01T00:00:00Z",
			"observation":{},"observation_digest":"sha256:22","capabilities_removed":[],"netns":"private"}`,
	} {
		var a Admission
		d := json.NewDecoder(bytes.NewReader([]byte(rec)))
		d.DisallowUnknownFields()
		if err := d.Decode(&a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.ContractID != "c" || a.Netns == "" || a.OperationID == "" {
			t.Fatalf("%s: decoded %+v", name, a)
		}
		if name == "host run" && (a.Facts.UID == nil || *a.Facts.UID != 0 || a.Command == nil || a.Command.Executable != "/usr/bin/make") {
			t.Fatalf("host run: uid %v command %+v", a.Facts.UID, a.Command)
		}
		out, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		if name == "container, nothing removed" && !bytes.Contains(out, []byte(`"capabilities_removed":[]`)) {
			t.Errorf("an empty capabilities_removed is not written as []: %s", out)
		}
		var before, after map[string]any
		json.Unmarshal([]byte(rec), &before)
		json.Unmarshal(out, &after)
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s: key %q lost on re-encoding", name, k)
			}
		}
	}
}
