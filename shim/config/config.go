package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/pelletier/go-toml/v2"
	"golang.org/x/sys/unix"
)

// Defaults of the operator configuration (docs/design.md §3).
const (
	DefaultPath        = "/etc/gensee/config.toml"
	DefaultCatalog     = "/etc/gensee/catalog.signed.json"
	DefaultTrustAnchor = "/etc/gensee/catalog-root-public-key.hex"
	DefaultStateDir    = "/var/lib/gensee"
	// EnvConfig names the operator config for the gensee CLI.
	EnvConfig = "GENSEE_CONFIG"
	// EnvConfigDirs lists (colon-separated) directories besides
	// DefaultConfigDir that a task's runtime options may name an operator
	// config in. The shim reads it from its own environment, which is the
	// containerd daemon's: only whoever starts containerd sets it.
	EnvConfigDirs = "GENSEE_CONFIG_DIRS"
	// DefaultKubeletPods is where the kubelet keeps pod volumes.
	DefaultKubeletPods = "/var/lib/kubelet/pods"
	// DefaultContainerdRoot is containerd's stock root.
	DefaultContainerdRoot = "/var/lib/containerd"
	// DefaultConfigDir holds the operator configs a task may name.
	DefaultConfigDir = "/etc/gensee"

	maxConfigBytes = 1 << 20
)

// Config is the operator configuration of the runtime.
type Config struct {
	// Catalog is the signed catalog envelope.
	Catalog string `toml:"catalog"`
	// TrustAnchor is the hex ed25519 key the catalog must be signed with.
	TrustAnchor string `toml:"trust_anchor"`
	// StateDir holds operation records and the catalog high-water mark.
	StateDir string `toml:"state_dir"`
	// GateFailedExitStatus, when non-zero, replaces the init's exit status
	// when the product gate fails, so pipelines that only see exit codes
	// fail the step. Zero keeps the workload's own status.
	GateFailedExitStatus uint32 `toml:"gate_failed_exit_status"`
	// GateTimeout bounds drain, diff, gate and staging at task exit.
	GateTimeout Duration `toml:"gate_timeout"`
	// NotifyCommand runs (argv, no shell) when an operation needs attention.
	NotifyCommand []string `toml:"notify_command"`
	// LogGroup is the NFLOG group denied packets are logged to (0: the
	// runtime's default).
	LogGroup uint16 `toml:"log_group"`
	// Runc holds runc options applied to every task (BinaryName, Root,
	// SystemdCgroup, ...), for CRI setups that pass a ConfigPath.
	Runc RuncOptions `toml:"runc"`
	// HookAllowlist lists the absolute paths of OCI hook binaries a
	// caller's spec may name (hooks run as host root before and after the
	// container). A spec hook not listed here is refused.
	HookAllowlist []string `toml:"hook_allowlist"`
	// LoggerAllowlist lists the absolute paths of logger binaries a
	// task's or exec's stdio may name (binary:// and binary-v2://, e.g.
	// ctr --log-uri): the runtime runs them as root outside every
	// boundary, as hooks. Any other logger is refused, and so is file://.
	LoggerAllowlist []string `toml:"logger_allowlist"`
	// WritableBindRoots are the host directories under which a spec may
	// bind a source writable; any other bind must be read-only. Default:
	// the kubelet's pod directories (volumes, etc-hosts, termination log).
	WritableBindRoots []string `toml:"writable_bind_roots"`
	// AllowedRuntimeFiles are exact paths under a container runtime's
	// directories (/run/containerd, /run/buildkit, ...) a spec may bind,
	// e.g. BuildKit's /run/buildkit/otel-grpc.sock trace socket, which it
	// binds into every RUN step. Nothing else there is ever bindable.
	AllowedRuntimeFiles []string `toml:"allowed_runtime_files"`
	// ContainerdRoot is containerd's root directory (its --root, config
	// root =): CRI keeps a pod's hosts, hostname and resolv.conf beneath
	// it, and a pod container may bind its own pod's. Default
	// /var/lib/containerd; k3s: /var/lib/rancher/k3s/agent/containerd,
	// RKE2: /var/lib/rancher/rke2/agent/containerd. The state dir is read
	// from the task's bundle path.
	ContainerdRoot string `toml:"containerd_root"`
	// ReadableBindRoots are host directories a spec may bind without the
	// runtime scanning them for unix sockets (large trees the operator
	// vouches for, e.g. a toolchain or dataset directory).
	ReadableBindRoots []string `toml:"readable_bind_roots"`
	// PromotionRoots are the host directories gensee promote may write
	// below: a product is promoted only to a path strictly under one of
	// them, reached without following a symlink. None (the default): no
	// product is ever promoted.
	PromotionRoots []string `toml:"promotion_roots"`
	// Retention bounds the records under StateDir (operations/, the index,
	// refusals.jsonl); the shim enforces it after a task's Delete, gensee
	// prune on demand.
	Retention Retention `toml:"retention"`

	// Path is where the config was read from ("" for built-in defaults).
	Path string `toml:"-"`
}

// Duration is a time.Duration written as a Go duration string in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string such as "2m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Default returns the built-in configuration.
func Default() Config {
	return Config{
		Catalog:           DefaultCatalog,
		TrustAnchor:       DefaultTrustAnchor,
		StateDir:          DefaultStateDir,
		GateTimeout:       Duration{2 * time.Minute},
		WritableBindRoots: []string{DefaultKubeletPods},
		ContainerdRoot:    DefaultContainerdRoot,
		Retention:         DefaultRetention(),
	}
}

// TrustedDirs returns the directories a task's runtime options may name an
// operator config in: DefaultConfigDir and the absolute, clean entries of
// env (the value of EnvConfigDirs).
func TrustedDirs(env string) []string {
	dirs := []string{DefaultConfigDir}
	for _, d := range filepath.SplitList(env) {
		if filepath.IsAbs(d) && filepath.Clean(d) == d && d != "/" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// LoadForTask reads the operator config a task's runtime options name
// (path, "" for the default). The caller of ctr chooses the runtime
// options (--runtime-config-path), and the config names the catalog and
// trust anchor: a root-owned file anywhere (say, one a container wrote into
// its own overlay upperdir) must not become the config. So path must lie
// in one of dirs, which come from the daemon's environment.
func LoadForTask(path string, dirs []string) (Config, error) {
	if path != "" {
		in := false
		for _, d := range dirs {
			if strings.HasPrefix(path, d+"/") && filepath.Clean(path) == path {
				in = true
			}
		}
		if !in {
			return Config{}, fmt.Errorf("the runtime options name operator config %s, outside the directories a task may use (%s); put it in one of them, or have whoever starts containerd list its directory in %s", path, strings.Join(dirs, ", "), EnvConfigDirs)
		}
	}
	return Load(path)
}

// Load reads the operator config at path ("": DefaultPath) for a path
// that enforces (the shim, the OCI hook, host runs): the file must exist.
// An enforcing runtime never falls back to built-in defaults: they name
// no catalog an operator chose, and a missing file is more likely a
// broken install than a wish.
func Load(path string) (Config, error) {
	if path == "" {
		path = DefaultPath
	}
	data, err := readTrusted(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("operator config %s does not exist: %w; create one (contrib/gensee/config.toml is a commented example) or name one: the runtime's ConfigPath option, the hook's --config, gensee --config or $%s", path, err, EnvConfig)
	}
	if err != nil {
		return Config{}, err
	}
	return Parse(path, data)
}

// LoadOrDefaults is Load for what only reads records (gensee ls, manifest
// show, events, attention list, refusals): with path "" and no file at
// DefaultPath it returns the built-in defaults, with Path "". A path the
// caller named must exist.
func LoadOrDefaults(path string) (Config, error) {
	if path == "" {
		if _, err := os.Lstat(DefaultPath); errors.Is(err, fs.ErrNotExist) {
			return Default(), nil
		}
	}
	return Load(path)
}

// Parse decodes config text; unknown keys are errors.
func Parse(path string, data []byte) (Config, error) {
	c := Default()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("operator config %s: %w; fix the file (keys: catalog, trust_anchor, state_dir, gate_failed_exit_status, gate_timeout, notify_command, log_group, hook_allowlist, logger_allowlist, writable_bind_roots, allowed_runtime_files, readable_bind_roots, containerd_root, promotion_roots, [runc], [retention] max_age, max_count, max_bytes)", path, err)
	}
	c.Path = path
	if err := c.Retention.validate(); err != nil {
		return Config{}, fmt.Errorf("operator config %s: %w", path, err)
	}
	if c.ContainerdRoot == "" || c.ContainerdRoot == "/" {
		return Config{}, fmt.Errorf("operator config %s: containerd_root %q must name containerd's root directory (default %s)", path, c.ContainerdRoot, DefaultContainerdRoot)
	}
	for name, p := range map[string]string{"catalog": c.Catalog, "trust_anchor": c.TrustAnchor, "state_dir": c.StateDir, "containerd_root": c.ContainerdRoot} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return Config{}, fmt.Errorf("operator config %s: %s %q must be an absolute, clean path", path, name, p)
		}
	}
	for key, list := range map[string][]string{"hook_allowlist": c.HookAllowlist, "logger_allowlist": c.LoggerAllowlist, "writable_bind_roots": c.WritableBindRoots, "allowed_runtime_files": c.AllowedRuntimeFiles, "readable_bind_roots": c.ReadableBindRoots, "promotion_roots": c.PromotionRoots} {
		for _, h := range list {
			if !filepath.IsAbs(h) || filepath.Clean(h) != h || h == "/" {
				return Config{}, fmt.Errorf("operator config %s: %s entry %q must be an absolute, clean path other than /", path, key, h)
			}
		}
	}
	for _, r := range c.PromotionRoots {
		if fsafe.Within(r, c.StateDir) || fsafe.Within(c.StateDir, r) {
			return Config{}, fmt.Errorf("operator config %s: promotion_roots entry %q overlaps state_dir %q, whose records are the evidence a promotion is checked against; name a directory outside it", path, r, c.StateDir)
		}
	}
	return c, nil
}

// readTrusted reads a root-owned regular file that group and other cannot
// write, without following a symlink at the last component.
func readTrusted(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("operator config %q: path must be absolute", path)
	}
	f, st, err := fsafe.OpenFile(path)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("operator config %s: is a symlink; point the runtime at the real file", path)
	case errors.Is(err, fsafe.ErrNotRegular):
		return nil, fmt.Errorf("operator config %s: not a regular file", path)
	case err != nil:
		return nil, fmt.Errorf("open operator config: %w", err)
	}
	defer f.Close()
	switch {
	case st.Uid != 0:
		return nil, fmt.Errorf("operator config %s: owned by uid %d, not root; run: chown root:root %s", path, st.Uid, path)
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("operator config %s: mode %04o lets group/other write it; run: chmod go-w %s", path, st.Mode&0o777, path)
	}
	data, err := fsafe.ReadAll(f, st, maxConfigBytes)
	if errors.Is(err, fsafe.ErrTooLarge) {
		return nil, fmt.Errorf("operator config %s: larger than %d bytes", path, maxConfigBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("read operator config: %w", err)
	}
	return data, nil
}

// RuncOptions are the runc options an operator may set in TOML, spelled as
// containerd's CRI spells them for the stock runc runtime.
type RuncOptions struct {
	BinaryName    string `toml:"BinaryName"`
	Root          string `toml:"Root"`
	SystemdCgroup bool   `toml:"SystemdCgroup"`
	NoPivotRoot   bool   `toml:"NoPivotRoot"`
	NoNewKeyring  bool   `toml:"NoNewKeyring"`
	ShimCgroup    string `toml:"ShimCgroup"`
	IoUID         uint32 `toml:"IoUid"`
	IoGID         uint32 `toml:"IoGid"`
	CriuImagePath string `toml:"CriuImagePath"`
	CriuWorkPath  string `toml:"CriuWorkPath"`
}
