package hostfacts

import (
	"compress/gzip"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNoX32ABIMatchesKernelConfig: the probe agrees with the running
// kernel's build config where the host publishes one (/proc/config.gz or
// /boot/config-<release>), and is false off x86_64.
func TestNoX32ABIMatchesKernelConfig(t *testing.T) {
	got := NoX32ABI()
	if runtime.GOARCH != "amd64" {
		if got {
			t.Fatal("NoX32ABI true off x86_64")
		}
		return
	}
	cfg, where := kernelConfig(t)
	if cfg == "" {
		t.Logf("no kernel config published; NoX32ABI = %v", got)
		return
	}
	if strings.Contains(cfg, "\n# CONFIG_X86_X32_ABI is not set\n") && !got {
		t.Errorf("%s: the kernel has no x32 ABI, NoX32ABI = false", where)
	}
	if strings.Contains(cfg, "\nCONFIG_X86_X32_ABI=y\n") && got && !strings.Contains(readCmdline(t), "syscall.x32=n") {
		t.Errorf("%s: the kernel has the x32 ABI, NoX32ABI = true", where)
	}
}

func kernelConfig(t *testing.T) (string, string) {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			if b, err := io.ReadAll(zr); err == nil {
				return "\n" + string(b), "/proc/config.gz"
			}
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	p := "/boot/config-" + unix.ByteSliceToString(u.Release[:])
	if b, err := os.ReadFile(p); err == nil {
		return "\n" + string(b), p
	}
	return "", ""
}

func readCmdline(t *testing.T) string {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
