package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gensee/gensee/shim/config"
)

// addConfigFlag defines --config for commands that read operation records
// or the runtime's trust inputs; resolve it with Env.operatorConfig.
func addConfigFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "config", "", "operator config `F` (TOML); default $"+config.EnvConfig+", else "+config.DefaultPath)
}

// ConfigPath resolves which operator config a command reads: the --config
// value, else $GENSEE_CONFIG, else config.DefaultPath. explicit is false
// only for the default, whose absence means the built-in defaults; a named
// file must exist. A relative path is made absolute against the working
// directory (config.Load takes absolute paths only).
func ConfigPath(flagValue string, getenv func(string) string) (path string, explicit bool, err error) {
	switch {
	case flagValue != "":
		path = flagValue
	case getenv != nil && getenv(config.EnvConfig) != "":
		path = getenv(config.EnvConfig)
	default:
		return config.DefaultPath, false, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", true, fmt.Errorf("resolve operator config path %q: %w", path, err)
	}
	return abs, true, nil
}

// operatorConfig loads the operator config ConfigPath resolves, for a
// command that only reads records: with no --config, no $GENSEE_CONFIG and
// no file at the default path it uses the built-in defaults and says so on
// stderr. The runtime applies the same ownership checks (root-owned, not
// group/other-writable).
func (e *Env) operatorConfig(flagValue string) (config.Config, error) {
	return e.loadConfig(flagValue, config.LoadOrDefaults)
}

// enforcingConfig is operatorConfig for a command that enforces or
// removes (boundary run, prune): the config must exist.
func (e *Env) enforcingConfig(flagValue string) (config.Config, error) {
	return e.loadConfig(flagValue, config.Load)
}

func (e *Env) loadConfig(flagValue string, loader func(string) (config.Config, error)) (config.Config, error) {
	if flagValue == "" {
		flagValue = e.globals().config // gensee --config F <command>
	}
	path, explicit, err := ConfigPath(flagValue, e.Getenv)
	if err != nil {
		return config.Config{}, fail(ExitUsage, "", err, "pass --config with an absolute path")
	}
	load := path
	if !explicit {
		load = "" // the default path
	}
	cfg, err := loader(load)
	if err != nil {
		code := ExitRefused // untrusted owner/mode, unknown keys, bad paths
		var pe *fs.PathError
		if errors.As(err, &pe) {
			code = ExitUsage
		}
		return config.Config{}, fail(code, "load operator config", err,
			"pass --config F or set $"+config.EnvConfig+" to a root-owned config file")
	}
	if cfg.Path == "" {
		fmt.Fprintf(e.Stderr, "gensee: no operator config at %s: built-in defaults (state_dir %s, catalog %s)\n", config.DefaultPath, cfg.StateDir, cfg.Catalog)
	}
	e.debugf("operator config %s (state dir %s)", orText(cfg.Path, "built-in defaults ("+config.DefaultPath+" is absent)"), cfg.StateDir)
	return cfg, nil
}
