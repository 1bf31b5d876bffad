package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// TestAskerRequest: a door's Asker tells the analyzer the stable
// observation, the command (never null lists), the door, the image and
// the newest manifests RecordStore indexed for the observation digest
// under the analyzer's inferences (not a safe_default run, not another
// analyzer's).
func TestAskerRequest(t *testing.T) {
	st := record.Store{Dir: t.TempDir()}
	cmdDigest := "sha256:" + strings.Repeat("c", 64)
	obs := spec.Observation{Schema: spec.SchemaObservation, ExecutableSHA256: strings.Repeat("e", 64), CommandDigest: cmdDigest, VolatileEnv: []string{"HOSTNAME"}}
	digest, _ := obs.Digest()
	for _, in := range []spec.InferenceSummary{{SafeDefault: true, Class: "build", Analyzer: "ref-analyzer"}, {Class: "build", Analyzer: "other-analyzer"}} {
		id, _ := record.NewOperationID()
		if _, err := st.CreateOperation(id, "builds", "job-"+id[:6]); err != nil {
			t.Fatal(err)
		}
		m := &spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, CommandDigest: cmdDigest, ObservationDigest: digest, Inference: in}
		if err := (RecordStore{Store: st, ID: id}).WriteManifest(m); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	var sums []string
	for range 3 {
		id, _ := record.NewOperationID()
		if _, err := st.CreateOperation(id, "builds", "job-"+id[:6]); err != nil {
			t.Fatal(err)
		}
		m := &spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, CommandDigest: cmdDigest, ObservationDigest: digest,
			Inference: spec.InferenceSummary{Analyzer: "ref-analyzer", Class: "build"}}
		if err := (RecordStore{Store: st, ID: id}).WriteManifest(m); err != nil {
			t.Fatal(err)
		}
		dir, _ := st.OperationDir(id)
		b, _ := os.ReadFile(filepath.Join(dir, record.ManifestFile))
		s := sha256.Sum256(b)
		ids, sums = append(ids, id), append(sums, hex.EncodeToString(s[:]))
	}
	got := make(chan spec.AnalyzerRequest, 1)
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q spec.AnalyzerRequest
		b, _ := io.ReadAll(r.Body)
		if err := spec.DecodeStrict(b, &q, spec.MaxAnalyzerRequest); err != nil {
			t.Errorf("the request does not decode strictly: %v", err)
		}
		if err := q.Validate(); err != nil {
			t.Errorf("the request does not validate: %v", err)
		}
		got <- q
		io.WriteString(w, `{"schema":"gensee.analyzer-answer/v1","no_class":"novel"}`)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	sel := &spec.Selector{ID: "pods", Analyzer: &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: sock, Timeout: "2s"}}
	ask := Asker(context.Background(), spec.DoorShim, st, "docker.io/library/busybox:1.36")
	env, con := ask(sel, obs, digest, spec.Command{Args: []string{"sh"}, Cwd: "/"})
	if env != nil || con.Outcome != spec.ConsultNoClass || con.History != 3 {
		t.Fatalf("consult %+v", con)
	}
	q := <-got
	if q.Door != spec.DoorShim || q.Selector != "pods" || q.Analyzer != "ref-analyzer" || q.Image != "docker.io/library/busybox:1.36" ||
		q.ObservationDigest != digest || q.Observation.VolatileEnv[0] != "HOSTNAME" || q.Command.Env == nil {
		t.Errorf("request %+v", q)
	}
	if len(q.History) != 3 || q.History[0].OperationID != ids[2] || q.History[0].ManifestSHA256 != sums[2] || q.History[2].OperationID != ids[0] {
		t.Errorf("history %+v, want newest first of %v", q.History, ids)
	}
}

// TestRecordStoreIndexFailure: a manifest is written even when it cannot
// be indexed.
func TestRecordStoreIndexFailure(t *testing.T) {
	st := record.Store{Dir: t.TempDir()}
	id, _ := record.NewOperationID()
	if _, err := st.CreateOperation(id, "builds", "job"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.Dir, "history"), nil, 0o600); err != nil { // a file where the dir goes
		t.Fatal(err)
	}
	m := &spec.Manifest{Schema: spec.SchemaManifest, OperationID: id, CommandDigest: "sha256:" + strings.Repeat("c", 64),
		ObservationDigest: "sha256:" + strings.Repeat("d", 64), Inference: spec.InferenceSummary{Analyzer: "ref-analyzer", Class: "build"}}
	if err := (RecordStore{Store: st, ID: id}).WriteManifest(m); err != nil {
		t.Fatalf("a failure to index failed the manifest: %v", err)
	}
	dir, _ := st.OperationDir(id)
	if _, err := os.Stat(filepath.Join(dir, record.ManifestFile)); err != nil {
		t.Fatal(err)
	}
}
