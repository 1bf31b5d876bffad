package analyzer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/gensee/gensee/spec"
)

// BenchmarkAsk is one whole consult against a local HTTP server: dial,
// peer check, request, strict answer. BenchmarkAskTransport is the same
// exchange through net/http's client (a DialContext transport, no
// keep-alive), the alternative roundTrip's comment weighs it against.
func BenchmarkAsk(b *testing.B) {
	p := serveHTTP(b, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"novel"}`))
	c, a, req := NewClient(), sel(p, "1s"), request()
	b.ReportAllocs()
	for b.Loop() {
		if _, con := c.Ask(context.Background(), a, req); con.Outcome != spec.ConsultNoClass {
			b.Fatalf("consult %+v", con)
		}
	}
}

func BenchmarkAskTransport(b *testing.B) {
	p := serveHTTP(b, answerWith(`{"schema":"gensee.analyzer-answer/v1","no_class":"novel"}`))
	req := request()
	b.ReportAllocs()
	for b.Loop() {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", p)
			}}}
		body, _ := json.Marshal(req)
		resp, err := hc.Post("http://gensee-analyzer"+spec.AnalyzerPath, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, spec.MaxAnalyzerAnswer+1))
		resp.Body.Close()
		if _, outcome, _ := decodeAnswer(raw); outcome != spec.ConsultNoClass {
			b.Fatalf("outcome %s", outcome)
		}
	}
}
