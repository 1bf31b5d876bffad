package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/shim/cgroup"
	"github.com/gensee/gensee/shim/runcinfo"
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

// Probe outcomes.
const (
	ProbeOK      = "ok"
	ProbeMissing = "missing"
	ProbeUnknown = "unknown"
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

// needsRoot is the answer for kernel probes run without root.
func needsRoot() ProbeResult {
	return ProbeResult{Result: ProbeUnknown, Detail: "cannot probe: needs root (it creates and destroys a network namespace and an nf_tables table); run the audit as root"}
}

func probeHost(ctx context.Context, n spec.Network) HostFacts {
	f := HostFacts{Root: os.Geteuid() == 0, Kernel: kernelRelease(), Probes: map[string]ProbeResult{}}
	f.Probes[probeCgroup2] = probeCgroup2Mount()
	fsys, err := os.ReadFile("/proc/filesystems")
	var dep []byte
	if err == nil && !hasFilesystem(fsys, "overlay") {
		dep, _ = os.ReadFile(filepath.Join("/lib/modules", f.Kernel, "modules.dep"))
	}
	f.Probes[probeOverlay] = overlayResult(fsys, err, dep)
	f.Probes[probeSeccomp] = probeRuncSeccomp(ctx)
	if !f.Root {
		f.Probes[probeNftSocket], f.Probes[probeNflog], f.Probes[probeTable] = needsRoot(), needsRoot(), needsRoot()
		return f
	}
	nf := probeNetfilter(ctx, n)
	f.Probes[probeNftSocket], f.Probes[probeNflog], f.Probes[probeTable] = nf.socket, nf.log, nf.table
	return f
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
	ok, err := runcinfo.SeccompEnabled(out)
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

// probeCgroup2Mount reads /proc/self/mountinfo; hybrid hosts mount cgroup2
// at /sys/fs/cgroup/unified, which the runtime handles the same way.
func probeCgroup2Mount() ProbeResult {
	h, err := cgroup.Find()
	switch {
	case errors.Is(err, cgroup.ErrNoCgroup2):
		return ProbeResult{ProbeMissing, "no cgroup2 file system in /proc/self/mountinfo: mount one (mount -t cgroup2 none /sys/fs/cgroup/unified) or boot with systemd.unified_cgroup_hierarchy=1"}
	case err != nil:
		return ProbeResult{ProbeUnknown, "cannot read the mount table: " + err.Error()}
	}
	return ProbeResult{ProbeOK, fmt.Sprintf("cgroup2 mounted at %s (root %s)", h.Mountpoint, h.Root)}
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
