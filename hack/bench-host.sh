#!/usr/bin/env bash
# P6: the time `gensee boundary run` adds to a host command, measured as a
# whole run (admission, sealed copy, cgroup, table read back, namespaces,
# Landlock, seccomp, then drain, gate, manifest) of `sh -c true` against
# `sh -c true` alone, alternating, and printed as the medians' difference
# (target: <= 30 ms added). A second line times alone the three process
# starts a host run makes one after another (below).
#
#   sudo hack/bench-host.sh            # P6_PAIRS=100 by default
#
# Needs root and a built bin/gensee. Makes its own trust material and
# workspace under /var/lib and removes them.
set -euo pipefail
export LC_ALL=C # awk and sort read and print its numbers with a dot, as bench.sh does
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "bench-host: run as root" >&2; exit 1; }
# 100 pairs (about 4 s): with 40, the difference of the two medians moved
# by about +-1.5 ms from one bench to the next on a quiet VM.
pairs=${P6_PAIRS:-100}
dir=$(mktemp -d /var/lib/gensee-bench-host-XXXXXX)
trap 'rm -rf "$dir"' EXIT
gensee_trust "$dir" >/dev/null
chmod 0711 "$dir"
ws=$dir/workspace
install -d -m 0777 "$ws"
cmd=(sh -c true)
gensee observe --user nobody --workspace "$ws" -- "${cmd[@]}" >"$dir/observation.json"
gensee inference make --observation "$dir/observation.json" --class build --confidence 9300 \
	--key "$dir/keys/catalog-root-private-key.hex" --out "$dir/inference.signed.json" >/dev/null
host_run() {
	GENSEE_CONFIG=$dir/etc/config.toml gensee boundary run --user nobody \
		--inference "$dir/inference.signed.json" --workspace "$ws" -- "${cmd[@]}" >/dev/null 2>&1 || true
}
ms() { echo $(( ($(date +%s%N) - $1) / 1000 )); } # microseconds
host_run # warm-up: page cache, the state dir's first records
g=() s=()
for ((i = 0; i < pairs; i++)); do
	t0=$(date +%s%N); host_run; g+=("$(ms "$t0")")
	t0=$(date +%s%N); "${cmd[@]}"; s+=("$(ms "$t0")")
done
gm=$(printf '%s\n' "${g[@]}" | gensee_median)
sm=$(printf '%s\n' "${s[@]}" | gensee_median)
# spread: min, q1, q3 and max of the microseconds on stdin, in ms.
spread() { sort -n | awk '{a[NR]=$1} END {printf "min %.1f, q1 %.1f, q3 %.1f, max %.1f", a[1]/1000, a[int((NR+3)/4)]/1000, a[int((3*NR+3)/4)]/1000, a[NR]/1000}'; }
awk -v g="$gm" -v s="$sm" -v n="$pairs" -v gs="$(printf '%s\n' "${g[@]}" | spread)" -v ss="$(printf '%s\n' "${s[@]}" | spread)" \
	-v pm="$(for ((i = 0; i < pairs; i++)); do echo $((g[i] - s[i])); done | gensee_median)" \
	'BEGIN{printf "P6 host run of sh -c true: gensee boundary run median %.1f ms, sh -c true median %.1f ms, added %.1f ms (target <= 30), pair by pair %.1f ms, ratio %.1f; %d pairs; boundary run %s ms; sh -c true %s ms\n", g/1000, s/1000, (g-s)/1000, pm/1000, g/s, n, gs, ss}'
# The process starts a host run cannot do without, timed alone: gensee,
# then gensee-sandbox as the wrapper (which gensee starts) and as the
# stage (which the wrapper starts), each spawned by the one before, so
# each start waits for the one before. The spawn of gensee-sandbox with
# the linger's argument starts its Go runtime and exits 0, as the linger
# does. Their sum is about the least the added time can be on this
# machine, before any of the boundary's own work (admission, table,
# record, view, gate, manifest): it tells a slow machine's P6 from a slow
# host run.
c=$(gensee_spawn_us gensee --version)
w=$(gensee_spawn_us gensee-sandbox __gensee-host-linger)
case $c$w in
*[!0-9.]*) echo "P6 process starts: gensee --version $(gensee_us_ms "$c"), gensee-sandbox $(gensee_us_ms "$w")" ;;
*) awk -v c="$c" -v w="$w" 'BEGIN{printf "P6 process starts, alone from bash (medians of 50): gensee --version %.1f ms, gensee-sandbox %.1f ms; a host run starts gensee, then gensee-sandbox twice (its wrapper, then its stage), each from the one before: %.1f ms of its added time before any of the boundary'"'"'s own work\n", c/1000, w/1000, (c+2*w)/1000}' ;;
esac
