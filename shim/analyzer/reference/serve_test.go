package reference

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// socketClient is an HTTP client that dials the unix socket.
func socketClient(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
}

// TestServe: over a unix socket (0600, in a directory made 0700, a stale
// socket replaced), POST /v1/infer answers; the answer's inference is
// admitted through the runtime's admission; other methods, paths and
// malformed bodies are refused; the socket is gone after ctx is done.
func TestServe(t *testing.T) {
	fx := newFixture(t)
	a := fx.load()
	socket := filepath.Join(t.TempDir(), "run", "analyzer.sock")
	stale, err := listen(socket) // a dead analyzer's socket, left behind
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, socket) }()
	c := socketClient(socket)
	waitFor(t, c)
	if st, err := os.Stat(socket); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, %v; want 0600", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Dir(socket)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, %v; want 0700", st.Mode(), err)
	}
	ask := asker(t, func(req spec.AnalyzerRequest) (spec.AnalyzerAnswer, error) {
		var ans spec.AnalyzerAnswer
		code, body := post(t, c, spec.AnalyzerPath, mustJSON(t, req))
		if code != http.StatusOK {
			t.Fatalf("POST: %d %s", code, body)
		}
		return ans, spec.DecodeStrict(body, &ans, spec.MaxAnalyzerAnswer)
	})
	obs, cmd := replica(t, "builder-1", exeGo, "go", "vet", "./x")
	d := admission.Decide(admission.Input{Catalog: fx.cat, CatalogVersion: fx.cat.Version, Facts: admission.Facts{ContainerdNamespace: "builds", Runtime: rt},
		Observation: obs, Command: cmd, Now: fx.now, Ask: ask})
	if !d.Admitted || d.SafeDefault || d.Inference == nil || d.Inference.Class != "lint" {
		t.Fatalf("decision %+v (analyzer %+v)", d, d.Analyzer)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(socket); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestHandlerRefuses: the handler's status codes.
func TestHandlerRefuses(t *testing.T) {
	fx := newFixture(t)
	h := fx.load().Handler()
	good := mustJSON(t, fx.request(exeGo, "go", "build"))
	for _, tt := range []struct {
		name, method, path string
		body               []byte
		want               int
		says               string
	}{
		{"ok", http.MethodPost, spec.AnalyzerPath, good, http.StatusOK, `"inference"`},
		{"get", http.MethodGet, spec.AnalyzerPath, nil, http.StatusMethodNotAllowed, "POST"},
		{"path", http.MethodPost, "/v1/other", good, http.StatusNotFound, ""},
		{"unknown field", http.MethodPost, spec.AnalyzerPath, append(good[:len(good)-1:len(good)-1], []byte(`,"extra":1}`)...), http.StatusBadRequest, "extra"},
		{"not json", http.MethodPost, spec.AnalyzerPath, []byte("{"), http.StatusBadRequest, ""},
		{"too large", http.MethodPost, spec.AnalyzerPath, bytes.Repeat([]byte(" "), spec.MaxAnalyzerRequest+1), http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tt.method, tt.path, bytes.NewReader(tt.body)))
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.says) {
				t.Fatalf("%s %s: %d %q; want %d saying %q", tt.method, tt.path, w.Code, w.Body, tt.want, tt.says)
			}
		})
	}
}

// TestListenRefusesNonSocket: a file at the socket path is not removed.
func TestListenRefusesNonSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "analyzer.sock")
	if err := os.WriteFile(p, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listen(p); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("listen = %v; want a refusal", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep" {
		t.Error("the file was changed")
	}
}

func post(t *testing.T, c *http.Client, path string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := c.Post("http://analyzer"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, spec.MaxAnalyzerAnswer+1))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func waitFor(t *testing.T, c *http.Client) {
	t.Helper()
	for range 200 {
		resp, err := c.Get("http://analyzer/")
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the analyzer never listened")
}

// BenchmarkInfer is the analyzer's own cost of one answer (a signed
// inference, with three history references already read once).
func BenchmarkInfer(b *testing.B) {
	fx := newFixture(b)
	a := fx.load()
	req := fx.request(exeMake, "make")
	req.Image = "registry.example/ci:1"
	for i := range 3 {
		req.History = append(req.History, fx.manifest(opid(i), req.ObservationDigest, "build", nil))
	}
	body, _ := json.Marshal(req)
	h := a.Handler()
	out := log.L.Logger.Out
	log.L.Logger.SetOutput(io.Discard) // the line per request is the same cost, but not the terminal's
	b.Cleanup(func() { log.L.Logger.SetOutput(out) })
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, spec.AnalyzerPath, bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			b.Fatal(w.Body)
		}
	}
}

// FuzzInfer: any request body is answered or refused, never a panic, and
// an answer's inference always verifies with the analyzer's key.
func FuzzInfer(f *testing.F) {
	fx := newFixture(f)
	a := fx.load()
	f.Add(mustJSON(f, fx.request(exeGo, "go", "build")))
	f.Add(mustJSON(f, fx.request(exeMake, "make")))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req spec.AnalyzerRequest
		if spec.DecodeStrict(body, &req, spec.MaxAnalyzerRequest) != nil {
			return
		}
		res, err := a.Infer(context.Background(), req, fx.now)
		if err == nil && len(res.Answer.Inference) > 0 {
			if _, _, err := fx.cat.OpenInference(res.Answer.Inference); err != nil {
				t.Fatalf("signed an inference that does not open: %v", err)
			}
		}
	})
}

// A socket directory another user may write in is refused: a squatter
// could bind the endpoint before the analyzer.
func TestListenRefusesWritableDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if l, err := listen(filepath.Join(dir, "a.sock")); err == nil {
		l.Close()
		t.Fatal("listen in a 0777 directory succeeded")
	} else if !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("listen in a 0777 directory: %v; want the directory named as writable", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := listen(filepath.Join(dir, "a.sock"))
	if err != nil {
		t.Fatalf("listen in a 0755 directory: %v", err)
	}
	l.Close()
}
