package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/containerd/log"

	"github.com/gensee/gensee/node/metrics"
	"github.com/gensee/gensee/node/records"
)

// Poster posts a record's Event, if it makes one (kubeevents.Poster).
type Poster interface {
	Post(records.Record) bool
}

// Daemon is one running gensee-node.
type Daemon struct {
	cfg     Config
	reader  *records.Reader
	metrics *metrics.Metrics
	poster  Poster // nil: --events is off
	// malformed is how many of the reader's skipped records were counted.
	malformed int
}

// New opens the reader at its cursor. poster may be nil.
func New(cfg Config, m *metrics.Metrics, poster Poster) (*Daemon, error) {
	r, err := records.Open(cfg.StateDir, cfg.CursorPath())
	if err != nil {
		return nil, err
	}
	return &Daemon{cfg: cfg, reader: r, metrics: m, poster: poster}, nil
}

// Step reads the new records once, hands each to the metrics and the
// poster, then commits the cursor; it returns how many records came.
func (d *Daemon) Step() (int, error) {
	recs, perr := d.reader.Poll()
	for _, r := range recs {
		d.metrics.Observe(r)
		if d.poster != nil {
			d.poster.Post(r)
		}
	}
	if n := d.reader.Malformed - d.malformed; n > 0 {
		d.metrics.Malformed(n)
		d.malformed = d.reader.Malformed
	}
	if err := d.reader.Commit(); err != nil {
		return len(recs), err
	}
	return len(recs), perr
}

// Run serves the metrics on cfg.Listen and steps every cfg.Interval until
// ctx is done. A step's error is logged and the next step tries again;
// only the listener's failure ends it.
func (d *Daemon) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.metrics.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.G(ctx).WithField("listen", ln.Addr().String()).WithField("state_dir", d.cfg.StateDir).
		WithField("events", d.poster != nil).Info("gensee-node serving")
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	// now is always ready: a step that stopped at the reader's budget
	// (records.Reader.More) is followed by the next at once, so a backlog
	// drains as fast as it is read, a budget at a time.
	now := make(chan time.Time)
	close(now)
	var last string // the last error logged: the same one is not logged every step
	for {
		_, err := d.Step()
		switch {
		case err != nil && err.Error() != last:
			log.G(ctx).WithError(err).Warn("read records")
			last = err.Error()
		case err == nil && last != "":
			log.G(ctx).Info("reading records again")
			last = ""
		}
		next := t.C
		if err == nil && d.reader.More {
			next = now
		}
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		case err := <-served:
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("serve metrics: %w", err)
		case <-next:
		}
	}
}
