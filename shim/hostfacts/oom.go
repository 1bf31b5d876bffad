package hostfacts

import (
	"os"
	"strconv"
	"strings"
)

// OOMScoreAdjFloor is the lowest oom_score_adj a container may ask for:
// this process's own when it is negative (the shim inherits containerd's,
// raised by one; containerd's CRI gives a pod's pause container the same
// under restrict_oom_score_adj), else 0. An unreadable value is 0.
func OOMScoreAdjFloor() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v > 0 {
		return 0
	}
	return v
}
