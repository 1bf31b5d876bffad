package node

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gensee/gensee/node/kubeevents"
	"github.com/gensee/gensee/shim/config"
)

// Defaults of gensee-node serve.
const (
	DefaultListen     = "127.0.0.1:9464"
	DefaultCursorDir  = "/var/lib/gensee-node"
	DefaultKubeconfig = "/etc/kubernetes/kubelet.conf"
	DefaultInterval   = time.Second
	// InCluster as --kubeconfig uses the pod's service account.
	InCluster = "in-cluster"
)

// Config is gensee-node serve's.
type Config struct {
	StateDir  string
	CursorDir string
	Listen    string
	Interval  time.Duration
	// Events posts Kubernetes Events (off by default).
	Events       bool
	EgressEvents bool
	EventsMaxAge time.Duration
	Kubeconfig   string
	NodeName     string
}

// CursorPath is the reader's cursor file.
func (c Config) CursorPath() string { return filepath.Join(c.CursorDir, "cursor.json") }

// FlagSet binds serve's flags to c, with their defaults.
func (c *Config) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("gensee-node serve", flag.ContinueOnError)
	fs.StringVar(&c.StateDir, "state-dir", config.DefaultStateDir, "the runtime's state directory (the operator config's state_dir)")
	fs.StringVar(&c.CursorDir, "cursor-dir", DefaultCursorDir, "where gensee-node keeps its cursor into the records (never under the state dir)")
	fs.StringVar(&c.Listen, "listen", DefaultListen, "address the metrics endpoint (/metrics) listens on")
	fs.DurationVar(&c.Interval, "interval", DefaultInterval, "how often the records are read")
	fs.BoolVar(&c.Events, "events", false, "post Kubernetes Events on the pods (refusals, failed gates, findings)")
	fs.BoolVar(&c.EgressEvents, "egress-events", false, "with --events, post denied connections too (rate-limited per pod)")
	fs.DurationVar(&c.EventsMaxAge, "events-max-age", kubeevents.DefaultMaxAge, "records older than this are not posted")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", DefaultKubeconfig, "credentials for --events: a kubeconfig (the kubelet's, by default), or \""+InCluster+"\" for the pod's service account")
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, the Events' source (default $NODE_NAME, else the hostname)")
	return fs
}

// Check completes and checks c after parsing.
func (c *Config) Check() error {
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		c.NodeName = strings.ToLower(h) // as the kubelet names its node
	}
	if !filepath.IsAbs(c.StateDir) || !filepath.IsAbs(c.CursorDir) {
		return errors.New("--state-dir and --cursor-dir must be absolute paths")
	}
	if rel, err := filepath.Rel(c.StateDir, c.CursorDir); err == nil && !strings.HasPrefix(rel, "..") {
		return errors.New("--cursor-dir must not be under --state-dir: gensee-node never writes the runtime's records")
	}
	if c.Interval < 100*time.Millisecond {
		return errors.New("--interval must be at least 100ms")
	}
	return nil
}
