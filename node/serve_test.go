package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gensee/gensee/node/metrics"
	"github.com/gensee/gensee/node/records"
	"github.com/gensee/gensee/spec"
)

type countingPoster struct{ n int }

func (p *countingPoster) Post(records.Record) bool { p.n++; return true }

// TestStep: a refusal is counted and posted once; a restarted daemon
// (same cursor) hands it out again to neither.
func TestStep(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), CursorDir: t.TempDir()}
	b, _ := json.Marshal(spec.RefusalRecord{At: time.Now(), Reason: "no_selector", Message: "m"})
	if err := os.WriteFile(filepath.Join(cfg.StateDir, "refusals.jsonl"), append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 0} {
		m, p := metrics.New(false), &countingPoster{}
		d, err := New(cfg, m, p)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := d.Step(); err != nil || n != want || p.n != want {
			t.Fatalf("start %d: %d records, %d posted, %v; want %d", i, n, p.n, err, want)
		}
		exp := "# HELP gensee_refusals_total Admission refusals (refusals.jsonl), by selector (empty before one matched) and reason.\n# TYPE gensee_refusals_total counter\n"
		if want == 1 {
			exp += "gensee_refusals_total{reason=\"no_selector\",selector=\"\"} 1\n"
		}
		if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(exp), "gensee_refusals_total"); err != nil {
			t.Errorf("start %d: %v", i, err)
		}
	}
}

// TestConfigCheck: the cursor never lives under the state dir.
func TestConfigCheck(t *testing.T) {
	var c Config
	if err := c.FlagSet().Parse([]string{"--state-dir", "/var/lib/gensee", "--cursor-dir", "/var/lib/gensee/node"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err == nil {
		t.Fatal("a cursor under the state dir was accepted")
	}
	c = Config{}
	if err := c.FlagSet().Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil || c.Listen != DefaultListen || c.Events || c.NodeName == "" {
		t.Fatalf("defaults %+v: %v", c, err)
	}
}
