#!/usr/bin/env bash
# P3/P4: the product gate's throughput against its peers, alternating,
# medians. Root. P3's anchor is the slower of sha256 of the same 1 GiB and a
# direct write of it (dd oflag=direct, synced); both are printed, with the
# ratio per round (min, median, max). P4's peer is a plain copy of the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
GENSEE_ROOT_TESTS=1 go test -count=1 -run '^$' -bench '^BenchmarkP3P4Report$' -benchtime 1x -timeout 30m ./shim/gate |
	grep -E '^\s*P[34]'
