#!/usr/bin/env bash
# P3/P4: the product gate's throughput against its peers (raw sha256 of the
# same bytes; a plain copy of the same tree), alternating, medians. Root.
set -euo pipefail
cd "$(dirname "$0")/.."
GENSEE_ROOT_TESTS=1 go test -count=1 -run '^$' -bench '^BenchmarkP3P4Report$' -benchtime 1x -timeout 30m ./shim/gate |
	grep -E '^\s*P[34]'
