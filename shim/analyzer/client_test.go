package analyzer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gensee/gensee/spec"
)

// sockPath is a fresh short socket path (sun_path holds 108 bytes).
func sockPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "a.sock")
}

// listen listens on a fresh socket and serves each connection with fn in
// its own goroutine until the test ends.
func listen(t testing.TB, fn func(net.Conn)) string {
	t.Helper()
	p := sockPath(t)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fn(c)
			}()
		}
	}()
	return p
}

// serveHTTP serves h over HTTP/1.1 on a fresh socket.
func serveHTTP(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	p := sockPath(t)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p
}

func answerWith(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != spec.AnalyzerPath {
			http.Error(w, "wrong request", http.StatusNotFound)
			return
		}
		var req spec.AnalyzerRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Schema != spec.SchemaAnalyzerRequest {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		io.WriteString(w, body)
	}
}

func sel(endpoint, timeout string) *spec.SelectorAnalyzer {
	return &spec.SelectorAnalyzer{ID: "ref-analyzer", Endpoint: endpoint, Timeout: timeout}
}

// readRequest reads one request from c, as a server would before it
// answers.
func readRequest(c net.Conn) {
	if r, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
		io.Copy(io.Discard, r.Body)
	}
}

func request() *spec.AnalyzerRequest {
	return &spec.AnalyzerRequest{Schema: spec.SchemaAnalyzerRequest, Analyzer: "ref-analyzer", Selector: "s", Door: spec.DoorShim,
		Command: spec.Command{Args: []string{"sh"}, Env: []string{}},
		History: []spec.HistoryRef{{OperationID: strings.Repeat("a", 32), ManifestSHA256: strings.Repeat("b", 64)}}}
}

const envelope = `{"payloadType":"application/vnd.gensee.inference.v1+json","payload":"e30=","signatures":[{"keyid":"k","sig":"c2ln"}]}`

func TestAskOutcomes(t *testing.T) {
	missing := sockPath(t)
	closed := sockPath(t)
	l, err := net.Listen("unix", closed)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the path stays, nothing listens: ECONNREFUSED
	cases := []struct {
		name, endpoint, outcome, detail string
		env                             bool
	}{
		{"answered", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","inference":`+envelope+`}`)), spec.ConsultAnswered, "", true},
		{"no class", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"novel: no rule matches\u001b[31m"}`)), spec.ConsultNoClass, "novel: no rule matches?[31m", false},
		{"no socket", missing, spec.ConsultUnreachable, "no such file or directory", false},
		{"nothing listens", closed, spec.ConsultUnreachable, "connection refused", false},
		{"status 500", serveHTTP(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) }), spec.ConsultMalformed, "HTTP 500", false},
		{"redirect", serveHTTP(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }), spec.ConsultMalformed, "HTTP 302", false},
		{"wrong schema", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v9","no_class":"x"}`)), spec.ConsultMalformed, "schema", false},
		{"unknown field", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"x","class":"build"}`)), spec.ConsultMalformed, "class", false},
		{"duplicate key", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"x","no_class":"y"}`)), spec.ConsultMalformed, "no_class", false},
		{"both", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","inference":`+envelope+`,"no_class":"x"}`)), spec.ConsultMalformed, "both", false},
		{"neither", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1"}`)), spec.ConsultMalformed, "neither", false},
		{"inference a string", serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","inference":"e30="}`)), spec.ConsultMalformed, "not a JSON object", false},
		{"not json", serveHTTP(t, answerWith(`class: build`)), spec.ConsultMalformed, "decode", false},
		{"closes at once", listen(t, func(c net.Conn) { readRequest(c) }), spec.ConsultMalformed, "ended before a whole answer", false},
		{"not http", listen(t, func(c net.Conn) { readRequest(c); io.WriteString(c, "hello\r\n\r\n") }), spec.ConsultMalformed, "malformed HTTP", false},
	}
	c := NewClient()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, con := c.Ask(context.Background(), sel(tc.endpoint, "2s"), request())
			if con.Outcome != tc.outcome || !strings.Contains(con.Detail, tc.detail) || (env != nil) != tc.env {
				t.Fatalf("outcome %q detail %q env %q; want %q containing %q (env %v)", con.Outcome, con.Detail, env, tc.outcome, tc.detail, tc.env)
			}
			if con.Analyzer != "ref-analyzer" || con.Endpoint != tc.endpoint || con.History != 1 || con.TookMicros <= 0 {
				t.Errorf("consult %+v", con)
			}
			if tc.env && string(env) != envelope {
				t.Errorf("envelope %s, want %s", env, envelope)
			}
		})
	}
}

// within fails t unless Ask with timeout ended (with outcome) before
// timeout plus slack.
func within(t *testing.T, endpoint string, timeout time.Duration, outcome string) spec.AnalyzerConsult {
	t.Helper()
	start := time.Now()
	_, con := NewClient().Ask(context.Background(), sel(endpoint, timeout.String()), request())
	took := time.Since(start)
	if took > timeout+250*time.Millisecond {
		t.Errorf("Ask took %s with a timeout of %s", took, timeout)
	}
	if con.Outcome != outcome {
		t.Errorf("outcome %q (%s), want %q", con.Outcome, con.Detail, outcome)
	}
	return con
}

func TestAskNeverBlocksPastTimeout(t *testing.T) {
	const timeout = 150 * time.Millisecond
	t.Run("accepts, never answers", func(t *testing.T) {
		p := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		within(t, p, timeout, spec.ConsultTimeout)
	})
	t.Run("never reads", func(t *testing.T) {
		p := listen(t, func(c net.Conn) { time.Sleep(2 * time.Second) })
		within(t, p, timeout, spec.ConsultTimeout)
	})
	t.Run("answers slowly", func(t *testing.T) {
		p := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Second)
			answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"late"}`)(w, r)
		})
		within(t, p, timeout, spec.ConsultTimeout)
	})
	t.Run("dribbles", func(t *testing.T) {
		p := listen(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
			for range 200 {
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		within(t, p, timeout, spec.ConsultTimeout)
	})
	t.Run("ctx cancelled", func(t *testing.T) {
		p := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, con := NewClient().Ask(ctx, sel(p, "3s"), request())
		if time.Since(start) > time.Second || con.Outcome != spec.ConsultTimeout {
			t.Errorf("outcome %q after %s", con.Outcome, time.Since(start))
		}
	})
}

func TestAskBoundsTheAnswer(t *testing.T) {
	const timeout = 2 * time.Second
	big := strings.Repeat("x", 10<<20)
	cases := []struct{ name, head string }{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n"},
		{"no length", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na00000\r\n"},
		{"header", "HTTP/1.1 200 OK\r\nX-Junk: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan int64, 1)
			p := listen(t, func(c net.Conn) {
				go io.Copy(io.Discard, c)
				n, _ := io.Copy(c, strings.NewReader(tc.head+big))
				sent <- n
			})
			con := within(t, p, timeout, spec.ConsultMalformed)
			if con.TookMicros > (500 * time.Millisecond).Microseconds() {
				t.Errorf("reading a 10 MB answer took %dus", con.TookMicros)
			}
			if n := <-sent; n >= 10<<20 {
				t.Errorf("the server wrote %d bytes: the client read them all", n)
			}
		})
	}
}

func TestAskPeerUID(t *testing.T) {
	p := serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"x"}`))
	if os.Geteuid() == 0 {
		// The test's server runs as root, whom every runtime accepts.
		if _, con := (Client{euid: 4242}).Ask(context.Background(), sel(p, "1s"), request()); con.Outcome != spec.ConsultNoClass {
			t.Fatalf("a root analyzer for a runtime of uid 4242: outcome %q (%s)", con.Outcome, con.Detail)
		}
		t.Skip("as root the test cannot serve a socket as another uid")
	}
	p = serveHTTP(t, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"x"}`))
	c := Client{euid: uint32(os.Geteuid()) + 1}
	env, con := c.Ask(context.Background(), sel(p, "1s"), request())
	want := fmt.Sprintf("runs as uid %d", os.Geteuid())
	if env != nil || con.Outcome != spec.ConsultUnreachable || !strings.Contains(con.Detail, want) {
		t.Fatalf("outcome %q detail %q; want unreachable naming %q", con.Outcome, con.Detail, want)
	}
	if _, con := NewClient().Ask(context.Background(), sel(p, "1s"), request()); con.Outcome != spec.ConsultNoClass {
		t.Fatalf("the runtime's own uid: outcome %q (%s)", con.Outcome, con.Detail)
	}
}

// TestAskSendsTheRequest: the server reads one strict request, with the
// request line, length and Connection: close the client promises.
func TestAskSendsTheRequest(t *testing.T) {
	got := make(chan *http.Request, 1)
	bodies := make(chan spec.AnalyzerRequest, 1)
	p := listen(t, func(c net.Conn) {
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		var q spec.AnalyzerRequest
		b, _ := io.ReadAll(r.Body)
		if err := spec.DecodeStrict(b, &q, spec.MaxAnalyzerRequest); err == nil {
			bodies <- q
		}
		got <- r
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 58\r\n\r\n"+`{"schema":"gensee.analyzer-answer/v1","no_class":"novel"}`+"\n")
	})
	_, con := NewClient().Ask(context.Background(), sel(p, "1s"), request())
	if con.Outcome != spec.ConsultNoClass || con.Detail != "novel" {
		t.Fatalf("consult %+v", con)
	}
	var r *http.Request
	select {
	case r = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the server read no request")
	}
	if r.Method != http.MethodPost || r.URL.Path != spec.AnalyzerPath || !r.Close || r.ContentLength <= 0 || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s close=%v length %d", r.Method, r.URL, r.Close, r.ContentLength)
	}
	select {
	case q := <-bodies:
		if q.Door != spec.DoorShim || len(q.History) != 1 {
			t.Errorf("request body %+v", q)
		}
	default:
		t.Error("the request's body does not decode strictly")
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain wrds":   "plain wrds",
		"a\nb\x00c":    "a?b?c",
		"\xff\xfeok":   "??ok",
		"ünïcode":      "ünïcode",
		"\u202eevil":   "?evil",
		"abcdefghijkl": "abcdefghij...",
	} {
		if got := Printable(in, 10); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
