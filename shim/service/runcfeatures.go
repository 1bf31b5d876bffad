package service

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/shim/runcfeatures"
)

// seccompProbe answers whether a runc binary applies seccomp profiles.
// Without seccomp, runc silently ignores linux.seccomp, and the socket
// families nftables cannot see would stay open: such a runc is refused,
// never skipped. The answer is cached in memory and in the state dir,
// keyed by the binary's identity (device, inode, size, mtime), so a
// container start pays for `runc features` once per runc build.
type seccompProbe struct {
	mu    sync.Mutex
	known map[string]bool // by binary identity; guarded by mu
}

// check returns the path of the runc binary named by the runc options
// (empty: "runc" on PATH) when it enforces seccomp.
func (p *seccompProbe) check(binary, stateDir string) (string, error) {
	if binary == "" {
		binary = "runc"
	}
	path, err := exec.LookPath(binary)
	if err != nil {
		return "", fmt.Errorf("find runc binary %q: %w", binary, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("stat runc binary %s: %w", path, err)
	}
	key := fmt.Sprintf("%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	p.mu.Lock()
	ok, cached := p.known[key]
	p.mu.Unlock()
	cacheFile := filepath.Join(stateDir, "runc-seccomp.json")
	if !cached {
		var disk map[string]bool
		if b, err := fsafe.ReadFile(cacheFile, 1<<16); err == nil && json.Unmarshal(b, &disk) == nil {
			ok, cached = disk[key]
		}
	}
	if !cached {
		if ok, err = probeSeccomp(path); err != nil {
			return "", err
		}
		b, _ := json.Marshal(map[string]bool{key: ok})
		_ = record.WriteFileAtomic(cacheFile, b, 0o600) // a cache: losing it costs one probe
	}
	p.mu.Lock()
	if p.known == nil {
		p.known = map[string]bool{}
	}
	p.known[key] = ok
	p.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("runc binary %s was built without seccomp (runc features: linux.seccomp.enabled is false)", path)
	}
	return path, nil
}

func probeSeccomp(path string) (bool, error) {
	out, err := runHelper([]string{path, "features"}, []string{"PATH=" + os.Getenv("PATH")}, nil, 1<<20, 5*time.Second)
	if err != nil {
		return false, fmt.Errorf("run %s features: %w", path, err)
	}
	return runcfeatures.SeccompEnabled(out)
}
