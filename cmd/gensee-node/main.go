// Command gensee-node is gensee's node daemon: `gensee-node serve` follows
// the runtime's records, serves Prometheus metrics and, with --events,
// posts Kubernetes Events on the pods they are about (package node).
//
// It is its own binary, not a `gensee` command: client-go and
// client_golang initialise dozens of packages (API schemes, protobuf
// registries) at start, which every `gensee boundary run` (benchmarked)
// would pay. A test keeps them out of cmd/gensee's dependencies.
//
// The metrics are an HTTP endpoint rather than a node-exporter textfile:
// the daemon is long-running anyway (it posts Events), an endpoint needs
// no node-exporter nor a shared directory, histograms and counters come
// from client_golang as scraped, and a scrape sees the daemon's own health
// (up, go and process metrics) too.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/node"
	"github.com/gensee/gensee/node/kubeevents"
	"github.com/gensee/gensee/node/metrics"
)

const usage = `Usage: gensee-node serve [--state-dir DIR] [--cursor-dir DIR] [--listen ADDR] [--interval D]
                        [--events [--egress-events] [--kubeconfig PATH|in-cluster] [--node-name NAME] [--events-max-age D]]
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var cfg node.Config
	fs := cfg.FlagSet()
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "gensee-node: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer stop()
	var poster node.Poster
	if cfg.Events {
		client, err := node.KubeClient(cfg.Kubeconfig)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gensee-node: %v; pass --kubeconfig, or run without --events\n", err)
			return 1
		}
		p := kubeevents.New(ctx, kubeevents.Config{Client: client, Node: cfg.NodeName, MaxAge: cfg.EventsMaxAge, Egress: cfg.EgressEvents})
		defer p.Shutdown()
		poster = p
	}
	d, err := node.New(cfg, metrics.New(true), poster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gensee-node: %v\n", err)
		return 1
	}
	if err := d.Run(ctx); err != nil {
		log.G(ctx).WithError(err).Error("gensee-node")
		return 1
	}
	return 0
}
