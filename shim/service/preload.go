package service

import (
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/engine"
)

// EnvPreload is the environment variable the front (shim/launcher) sets
// for the long-lived shim it starts: the config path containerd's start
// call named in its runtime options, "" for none (the shim's default
// config). It is a hint, never trusted: the preload applies every rule
// a Create's own load applies, and a Create uses it only for the same
// config and only while it is current (take).
const EnvPreload = "GENSEE_PRELOAD_CONFIG"

// preload is the first Create's operator config and catalog, loaded as
// soon as the long-lived shim's task plugin starts, for the config the
// front read from containerd's start call (EnvPreload): a shim process is
// started for its task's Create, and the catalog's load and verification
// is what that Create waits for first. Create takes it once (take) and
// uses its catalog only when the config Create loads itself is the same,
// within preloadFresh of the preload's start, and the load is still
// current at Create's own time (the same catalog file and anchor, within
// its validity window, still admitted by the high-water mark: what a load
// then would check but the decode and the signature); else Create loads
// the catalog as it is then. A Create with another config, and every
// later Create of the process (a shim that serves a group), loads its own.
type preload struct {
	mu    sync.Mutex
	taken bool

	path    string        // the config the front named
	started time.Time     // when the preload began
	loaded  chan struct{} // closed once cfg, err and cat are set
	cfg     config.Config
	err     error        // the config's load
	cat     *catalogLoad // nil when the config did not load
}

// pending is the preload Preload took, for the service the shim's
// plugin then makes (newService takes it).
var pending *preload

// Preload takes the preload the front asked for, if it did, first thing in
// main: the variable is not handed on to what the shim runs. The load
// itself starts with the task plugin (begin), under the start-up's hold on
// the collector: begun in main, its allocations passed pkg/shim's GOGC=40
// goal (1.6 MB) on the way and started a collection of the start-up's
// heap, CPU the start-up then shared; begun here, none runs, and the
// Create that takes it started no later for it (30 alternating pairs on
// the 2-vCPU VMs).
func Preload() {
	path, ok := os.LookupEnv(EnvPreload)
	if !ok {
		return
	}
	os.Unsetenv(EnvPreload)
	pending = &preload{path: path, loaded: make(chan struct{})}
}

// begin starts the load in the background; once, by newService.
func (p *preload) begin() {
	if p == nil {
		return
	}
	load := daemonConfigLoader()
	p.started = time.Now()
	go func() {
		defer close(p.loaded)
		if p.cfg, p.err = load(p.path); p.err == nil {
			p.cat = startCatalog(p.cfg, time.Now)
		}
	}()
}

// preloadFresh bounds how long after its start (the task plugin's) a
// preload may serve a Create: a Create comes milliseconds after its shim
// starts; a shim that waited longer (one left running after a failed
// sandbox, say) loads the catalog as it is then.
const preloadFresh = 5 * time.Second

// take returns the catalog's load for a Create whose config is cfg: the
// preloaded one if it is still current at now (engine.TrustCurrent: the
// same catalog file and anchor, within its window, still admitted by the
// high-water mark) and fresh, else a load made now; nil the second time,
// for another config, or when there is none (the caller loads then).
func (p *preload) take(cfg config.Config, now func() time.Time) *catalogLoad {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	taken := p.taken
	p.taken = true
	p.mu.Unlock()
	if taken {
		return nil
	}
	<-p.loaded
	if p.err != nil || !reflect.DeepEqual(p.cfg, cfg) {
		return nil
	}
	pre := p.cat
	l := &catalogLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.Now()
		cat, _, rf := pre.wait()
		if at := now(); rf == nil && at.Sub(p.started) <= preloadFresh && engine.TrustCurrent(cfg, cat, cfg.Catalog, at) {
			l.cat, l.preloaded = cat, true
		} else {
			l.cat, l.err = engine.LoadTrust(cfg, cfg.Catalog, "catalog", at)
		}
		l.took = time.Since(t)
	}()
	return l
}
