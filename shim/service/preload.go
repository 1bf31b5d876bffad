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
// config.
const EnvPreload = "GENSEE_PRELOAD_CONFIG"

// preload is the first Create's operator config and catalog, loaded as
// soon as the long-lived shim starts, for the config the front read from
// containerd's start call (EnvPreload): a shim process is
// started for its task's Create, and the catalog's load and verification
// is what that Create waits for first. Create takes it once (take) and
// uses its catalog only when the config Create loads itself is the same;
// a Create with another config, and every later Create of the process (a
// shim that serves a group), loads its own. The catalog's validity window
// is checked again at Create's own time; the load's other rules (the
// file, the anchor's signature, the high-water mark) held when it ran, a
// few milliseconds before, as for a Create that had come then.
type preload struct {
	mu    sync.Mutex
	taken bool

	loaded chan struct{} // closed once cfg, err and cat are set
	cfg    config.Config
	err    error        // the config's load
	cat    *catalogLoad // nil when the config did not load
}

// pending is the preload Preload started, for the service the shim's
// plugin then makes (newService takes it).
var pending *preload

// Preload starts the preload the front asked for, if it did, before the
// shim's start-up (its plugins, its socket) and while containerd connects;
// call it once, first thing in main. The variable is not handed on to
// what the shim runs.
func Preload() {
	path, ok := os.LookupEnv(EnvPreload)
	if !ok {
		return
	}
	os.Unsetenv(EnvPreload)
	load := loadTaskConfig(config.TrustedDirs(os.Getenv(config.EnvConfigDirs)), os.Getenv(config.EnvConfig))
	p := &preload{loaded: make(chan struct{})}
	go func() {
		defer close(p.loaded)
		if p.cfg, p.err = load(path); p.err == nil {
			p.cat = startCatalog(p.cfg, time.Now)
		}
	}()
	pending = p
}

// take returns the preloaded catalog's load for a Create whose config is
// cfg, checked again at now; nil the second time, for another config, or
// when there is none.
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
	l := &catalogLoad{done: make(chan struct{}), preloaded: true}
	go func() {
		defer close(l.done)
		t := time.Now()
		l.cat, _, l.err = pre.wait()
		if l.cat != nil {
			if rf := engine.RecheckTrust(l.cat, cfg.Catalog, "catalog", now()); rf != nil {
				l.cat, l.err = nil, rf
			}
		}
		l.took = time.Since(t)
	}()
	return l
}
