//go:build !amd64 && !arm64

package sandbox

// nativeArch 0 makes HostFilter refuse: the filter's offsets and syscall
// table are checked on amd64 and arm64 only.
const (
	nativeArch = 0
	x32Bit     = 0
	archName   = ""
)
