package cli

import (
	"context"
	"testing"

	"github.com/gensee/gensee/internal/roottest"
	"github.com/gensee/gensee/spec"
)

// TestRootProbeHost runs the real probes (netpolicy.Probe's kernel probes
// among them, tested there) for both example contracts and checks the audit
// gets them under its probe names.
func TestRootProbeHost(t *testing.T) {
	roottest.Require(t)
	ctx := context.Background()
	for _, name := range []string{"offline-structured-result.json", "allow-exact.json"} {
		t.Run(name, func(t *testing.T) {
			c, err := spec.ParseContract(readFile(t, contrib(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			f := probeHost(ctx, c.Network)
			if !f.Root {
				t.Fatal("probeHost says not root")
			}
			for _, p := range []string{probeCgroup2, probeNftSocket, probeNflog, probeTable} {
				if f.Probes[p].Result != ProbeOK {
					t.Errorf("%s: %+v", p, f.Probes[p])
				}
			}
		})
	}
}
