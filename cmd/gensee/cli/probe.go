package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/netpolicy"
	"github.com/gensee/gensee/shim/runcfeatures"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

// Prober answers boundary audit's questions about this host. n is the
// contract's network section: one probe installs the runtime's own table
// for it in a throwaway namespace. probeHost is the real one.
type Prober func(ctx context.Context, n spec.Network) HostFacts

// HostFacts is what the probes found. Probes is keyed by probe name.
type HostFacts struct {
	Root   bool
	Kernel string
	Probes map[string]ProbeResult
}

// ProbeResult is one probe's outcome: ProbeOK (verified present),
// ProbeMissing (verified absent) or ProbeUnknown (could not be probed).
type ProbeResult struct {
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// Probe outcomes: netpolicy's, as the audit's JSON spells them.
const (
	ProbeOK      = string(netpolicy.ProbeOK)
	ProbeMissing = string(netpolicy.ProbeMissing)
	ProbeUnknown = string(netpolicy.ProbeUnknown)
)

// Probe names, stable in the audit's JSON.
const (
	probeCgroup2   = "cgroup2"
	probeOverlay   = "overlayfs"
	probeNftSocket = "nft_socket_cgroupv2"
	probeNflog     = "nflog"
	probeTable     = "contract_table"
	probeSeccomp   = "runc_seccomp"
)

// probeHost is the real Prober: the network authority's kernel probes are
// netpolicy.Probe's (with the log group the runtime uses without an
// operator config); overlayfs and runc's seccomp are read here.
func probeHost(ctx context.Context, n spec.Network) HostFacts {
	f := HostFacts{Root: os.Geteuid() == 0, Kernel: kernelRelease(), Probes: map[string]ProbeResult{}}
	s := netpolicy.Probe(ctx, n, config.Default().LogGroup)
	f.Probes[probeCgroup2] = fromNetpolicy(s.Cgroup2)
	f.Probes[probeNftSocket] = fromNetpolicy(s.SocketCgroupV2)
	f.Probes[probeNflog] = fromNetpolicy(s.NFLog)
	f.Probes[probeTable] = fromNetpolicy(s.Table)
	fsys, err := os.ReadFile("/proc/filesystems")
	var dep []byte
	if err == nil && !hasFilesystem(fsys, "overlay") {
		dep, _ = os.ReadFile(filepath.Join("/lib/modules", f.Kernel, "modules.dep"))
	}
	f.Probes[probeOverlay] = overlayResult(fsys, err, dep)
	f.Probes[probeSeccomp] = probeRuncSeccomp(ctx)
	return f
}

func fromNetpolicy(r netpolicy.ProbeResult) ProbeResult {
	return ProbeResult{Result: string(r.Result), Detail: r.Detail}
}

// probeRuncSeccomp asks the runc on PATH (`runc features`) whether it
// applies seccomp profiles: the shim refuses tasks when it does not.
func probeRuncSeccomp(ctx context.Context) ProbeResult {
	path, err := exec.LookPath("runc")
	if err != nil {
		return ProbeResult{ProbeUnknown, "no runc on PATH to ask (the shim asks the runc of its runc options)"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "features").Output()
	if err != nil {
		return ProbeResult{ProbeUnknown, path + " features: " + err.Error()}
	}
	ok, err := runcfeatures.SeccompEnabled(out)
	if err != nil {
		return ProbeResult{ProbeUnknown, path + ": " + err.Error()}
	}
	if !ok {
		return ProbeResult{ProbeMissing, path + " was built without seccomp: build runc with -tags seccomp (libseccomp); the runtime refuses tasks otherwise"}
	}
	return ProbeResult{ProbeOK, path + " applies seccomp profiles"}
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// overlayResult decides the overlayfs probe from /proc/filesystems (and its
// read error) and, when overlay is not registered yet, the kernel's
// modules.dep (nil when absent).
func overlayResult(filesystems []byte, readErr error, modulesDep []byte) ProbeResult {
	switch {
	case readErr != nil:
		return ProbeResult{ProbeUnknown, "cannot read /proc/filesystems: " + readErr.Error()}
	case hasFilesystem(filesystems, "overlay"):
		return ProbeResult{ProbeOK, "overlay is registered in /proc/filesystems"}
	case bytes.Contains(modulesDep, []byte("/overlay.ko")):
		return ProbeResult{ProbeUnknown, "overlay is not registered yet, but the module exists; run modprobe overlay and audit again"}
	}
	return ProbeResult{ProbeMissing, "overlay is not in /proc/filesystems and no overlay module was found; the kernel needs CONFIG_OVERLAY_FS"}
}

// hasFilesystem reports whether a /proc/filesystems table lists name
// ("nodev\toverlay" or "\text4" lines).
func hasFilesystem(table []byte, name string) bool {
	for _, line := range bytes.Split(table, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) > 0 && string(fields[len(fields)-1]) == name {
			return true
		}
	}
	return false
}
