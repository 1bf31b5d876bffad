#!/usr/bin/env bash
# P2: install an allow_exact policy of 10,000 tuples into a fresh network
# namespace with gensee (plan, one netlink batch, conntrack flush, full
# read-back) and with `nft -f` of the same table as text, alternating, and
# print the medians and their ratio (target: gensee <= 0.40x nft).
#
#   sudo hack/bench-p2.sh            # P2_TUPLES=10000 P2_ROUNDS=7 by default
#
# Needs root and nft(8) (apt-get install -y nftables). Creates and removes
# its own namespaces and one test cgroup; touches nothing else.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ "$(id -u)" != 0 ]; then
	echo "bench-p2: needs root (network namespaces, nftables, cgroups)" >&2
	exit 1
fi
if ! command -v nft >/dev/null; then
	echo "bench-p2: nft not found: apt-get install -y nftables" >&2
	exit 1
fi
if ! out=$(GENSEE_ROOT_TESTS=1 go test -count=1 -run '^$' -bench '^BenchmarkP2Report$' -benchtime 1x ./shim/netpolicy \
	-args -p2.tuples="${P2_TUPLES:-10000}" -p2.rounds="${P2_ROUNDS:-7}" 2>&1); then
	echo "$out" >&2
	echo "bench-p2: failed" >&2
	exit 1
fi
grep '^P2 ' <<<"$out"
