package hooks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/shim/record"
)

// Poststop is the poststop stage: it asks the operation's monitor to
// finish (gate, staging, counters, table removal, manifest) and waits for
// its answer. A poststop cannot fail the run (podman only logs a failing
// one), so what went wrong is in the manifest and the log; the error
// returned is for that log. Without a live monitor it ends what the
// operation left (CleanOrphans: drain, table, a manifest that says so).
func Poststop(ctx context.Context, o Options, s State) error {
	st := record.Store{Dir: o.Config.StateDir}
	id, err := st.Lookup(Namespace, s.ID)
	if err != nil {
		return nil // never admitted by this hook (or refused): nothing to finish
	}
	if dir, err := st.OperationDir(id); err == nil {
		if _, err := os.Stat(filepath.Join(dir, record.ManifestFile)); err == nil {
			return nil // already finished (a second poststop, or after Grace)
		}
	}
	c, err := net.DialTimeout("unix", socketPath(st.Dir, id), 5*time.Second)
	if err != nil {
		cleaned, cerr := CleanOrphans(ctx, st.Dir)
		if cerr != nil {
			return cerr
		}
		if !slices.Contains(cleaned, id) {
			return fmt.Errorf("reach the monitor of operation %s: %w", id, err)
		}
		log.G(ctx).WithField("operation_id", id).WithError(err).
			Error("the operation's monitor process had died: its cgroup was drained, its table removed, and its manifest says so")
		return nil
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(o.gateTimeout() + 30*time.Second))
	if _, err := c.Write([]byte("poststop\n")); err != nil {
		return fmt.Errorf("ask the monitor to finish: %w", err)
	}
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("wait for the monitor to finish: %w", err)
	}
	var r poststopReply
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("decode the monitor's answer: %w", err)
	}
	if r.Error != "" {
		return fmt.Errorf("operation %s: %s", id, r.Error)
	}
	log.G(ctx).WithField("operation_id", id).WithField("verdict", r.Verdict).Info("operation finished at poststop")
	return nil
}
