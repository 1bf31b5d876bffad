#!/usr/bin/env bash
# Benchmarks against the peers the issues name, each in one run with the two
# contenders alternating, printing medians and ratios:
#   P1  `ctr run --rm` of a trivial container: gensee (deny_all) vs io.containerd.runc.v2
#   P2  install of 10,000 allow_exact tuples into a fresh netns: gensee vs `nft -f`
#   P3  gate of a 1 GiB blob with staging vs sha256 of the same bytes
#   P4  gate of a 100,000-file directory_tree (entries/s)
# Not a test: the figures go into the closing notes. Needs root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "bench: run as root (make bench)" >&2; exit 1; }
pairs=${P1_PAIRS:-15}

dir=$(mktemp -d /var/lib/gensee-bench-XXXXXX)
trap 'gensee_daemon_stop "$dir" demo; rm -rf "$dir"' EXIT
gensee_trust "$dir" >/dev/null
gensee_daemon_start "$dir"
gensee_image "$dir"
gensee_ctr demo images import "$dir/image.tar" >/dev/null

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
run_once() { # RUNTIME ID
	local t0 rt=$1 id=$2
	local extra=()
	[ "$rt" = io.containerd.gensee.v2 ] && extra=(--runtime-config-path "$dir/etc/config.toml")
	t0=$(date +%s%N)
	gensee_ctr demo run --rm --runtime "$rt" "${extra[@]}" docker.io/gensee/test:latest "$id" /bin/true >/dev/null 2>&1
	ms "$t0"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "P1: ctr run --rm /bin/true, $pairs alternating pairs (plus one warm-up each)"
run_once io.containerd.runc.v2 warm-r >/dev/null
run_once io.containerd.gensee.v2 warm-g >/dev/null
g=() r=()
for i in $(seq 1 "$pairs"); do
	if [ $((i % 2)) = 0 ]; then
		r+=("$(run_once io.containerd.runc.v2 r$i)"); g+=("$(run_once io.containerd.gensee.v2 g$i)")
	else
		g+=("$(run_once io.containerd.gensee.v2 g$i)"); r+=("$(run_once io.containerd.runc.v2 r$i)")
	fi
done
gm=$(printf '%s\n' "${g[@]}" | median)
rm_=$(printf '%s\n' "${r[@]}" | median)
p1="P1 ctr run --rm: gensee median ${gm} ms, runc.v2 median ${rm_} ms, ratio $(awk -v a="$gm" -v b="$rm_" 'BEGIN{printf "%.3f", a/b}') (target <= 1.05)"
echo "$p1"
gensee_daemon_stop "$dir" demo

cd "$gensee_top"
echo "P2: allow_exact install vs nft -f"
p2=$(./hack/bench-p2.sh 2>/dev/null || true)
echo "$p2"
echo "P3/P4: gate throughput"
p34=$(./hack/bench-gate.sh 2>/dev/null || true)
echo "$p34"

echo
echo "== summary"
printf '%s\n' "$p1" "$p2" "$p34"
