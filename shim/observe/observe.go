package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Sentinel errors; every error from this package wraps one of them.
var (
	// ErrInvalidBundle: config.json is missing, too large, not JSON, or
	// lacks the fields an observation needs (root, process, args).
	ErrInvalidBundle = errors.New("invalid bundle")
	// ErrExecutableNotFound: process.args[0] resolves to no file inside
	// the rootfs (explicit path missing, or no PATH entry has it).
	ErrExecutableNotFound = errors.New("executable not found")
	// ErrNotExecutable: the explicit path exists but is not a regular file
	// with an exec bit (directory, fifo, device, socket, mode 0644).
	ErrNotExecutable = errors.New("not an executable regular file")
	// ErrExecutableTooLarge: the executable exceeds MaxExecutableBytes.
	ErrExecutableTooLarge = errors.New("executable too large")
)

// maxConfigBytes bounds config.json. Real specs are a few KiB; CRI specs
// with many mounts and env vars stay well under 1 MiB.
const maxConfigBytes = 4 << 20

// FromBundle reads bundleDir/config.json and derives the observation of
// its process against the bundle's rootfs (root.path, relative to the
// bundle unless absolute).
func FromBundle(bundleDir string) (spec.Observation, error) {
	cfg, err := ReadSpec(bundleDir)
	if err != nil {
		return spec.Observation{}, err
	}
	if cfg.Root == nil || cfg.Root.Path == "" {
		return spec.Observation{}, fmt.Errorf("bundle %s: config.json has no root.path: %w", bundleDir, ErrInvalidBundle)
	}
	rootfs := cfg.Root.Path
	if !filepath.IsAbs(rootfs) {
		rootfs = filepath.Join(bundleDir, rootfs)
	}
	return FromRootfs(rootfs, cfg)
}

// ReadSpec reads and decodes bundleDir/config.json (bounded, no symlink at
// the last component, never blocking on a special file).
func ReadSpec(bundleDir string) (*specs.Spec, error) {
	cfgPath := filepath.Join(bundleDir, "config.json")
	data, err := readConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	var cfg specs.Spec
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("decode %s: %v: %w", cfgPath, err, ErrInvalidBundle)
	}
	return &cfg, nil
}

// readConfig reads config.json without following a symlink in its last
// component and without blocking on a special file.
func readConfig(path string) ([]byte, error) {
	data, err := fsafe.ReadFile(path, maxConfigBytes)
	switch {
	case errors.Is(err, fsafe.ErrNotRegular), errors.Is(err, fsafe.ErrTooLarge):
		return nil, fmt.Errorf("bundle config: %w: %w", err, ErrInvalidBundle)
	case err != nil:
		return nil, fmt.Errorf("open bundle config: %w: %w", err, ErrInvalidBundle)
	}
	return data, nil
}

// FromRootfs derives the observation of config's process against rootfs,
// a host path to the container's root directory (trusted: it comes from
// the runtime, not from the container).
func FromRootfs(rootfs string, config *specs.Spec) (spec.Observation, error) {
	pend, err := Prepare(rootfs, config)
	if err != nil {
		return spec.Observation{}, err
	}
	return pend.Hash()
}

// Pending is an observation whose executable is resolved and open but not
// yet hashed: Hash completes it, so a caller may read the executable's
// bytes while other work goes on. The bytes hashed are the open file's,
// whatever the rootfs's names point at by then.
type Pending struct {
	rootfs string
	obs    spec.Observation // all but ExecutableSHA256
	exe    executable
}

// Prepare resolves config's process against rootfs and opens its
// executable, as FromRootfs does, without hashing it. The caller must call
// Hash or Close.
func Prepare(rootfs string, config *specs.Spec) (*Pending, error) {
	if config == nil || config.Process == nil {
		return nil, fmt.Errorf("observe %s: config has no process: %w", rootfs, ErrInvalidBundle)
	}
	p := config.Process
	if len(p.Args) == 0 || p.Args[0] == "" {
		return nil, fmt.Errorf("observe %s: process.args is empty: %w", rootfs, ErrInvalidBundle)
	}
	// command_digest covers process.args, env and cwd verbatim (order and
	// duplicates kept, nothing resolved): spec.Command, shared with
	// `gensee observe` (see CommandDigest).
	cmd, err := CommandDigest(p.Args, p.Env, p.Cwd)
	if err != nil {
		return nil, fmt.Errorf("observe rootfs %s: %w", rootfs, err)
	}
	root, err := os.OpenFile(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open rootfs: %w: %w", err, ErrInvalidBundle)
	}
	defer root.Close()
	exe, err := resolve(root, p.Args[0], cwdOf(p), pathOf(p.Env))
	if err != nil {
		return nil, fmt.Errorf("observe rootfs %s: %w", rootfs, err)
	}
	if err := checkSize(exe); err != nil {
		exe.f.Close()
		return nil, fmt.Errorf("observe rootfs %s: %w", rootfs, err)
	}
	return &Pending{rootfs: rootfs, exe: exe, obs: spec.Observation{
		Schema:        spec.SchemaObservation,
		UID:           p.User.UID,
		GID:           p.User.GID,
		CommandDigest: cmd,
	}}, nil
}

// Partial is the observation without its executable_sha256: what a
// decision may use that checks no inference or preflight observation.
func (p *Pending) Partial() spec.Observation { return p.obs }

// Hash reads and hashes the open executable, closes it, and returns the
// whole observation.
func (p *Pending) Hash() (spec.Observation, error) {
	defer p.Close()
	sum, err := hashExecutable(p.exe)
	if err != nil {
		return spec.Observation{}, fmt.Errorf("observe rootfs %s: %w", p.rootfs, err)
	}
	obs := p.obs
	obs.ExecutableSHA256 = sum
	return obs, nil
}

// Close releases the executable; safe after Hash and more than once.
func (p *Pending) Close() {
	if p.exe.f != nil {
		p.exe.f.Close()
		p.exe.f = nil
	}
}
