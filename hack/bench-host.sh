#!/usr/bin/env bash
# P6: the time `gensee boundary run` adds to a host command, measured as a
# whole run (admission, sealed copy, cgroup, table read back, namespaces,
# Landlock, seccomp, then drain, gate, manifest) of `sh -c true` against
# `sh -c true` alone, alternating, and printed as the medians' difference
# (target: <= 30 ms added). A second line times alone the chain of
# process starts a host run makes (below).
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
# The chain of process starts a host run makes, timed alone: gensee,
# then the wrapper gensee starts and the stage the wrapper starts, each
# gensee-sandbox (the one beside the gensee that runs, else gensee
# itself, as the run does: shim/hostrun/sandboxbin.go), each spawned by
# the one before. With the linger's argument the binary starts its Go
# runtime and exits 0, as the linger does. Each spawn from bash also
# pays a fork, an exit and bash's wait, which sh -c true pays once too:
# the line takes one spawn of /bin/true off their sum. What is left is a
# rough figure, not a bound: the real starts also make namespaces and a
# cgroup, and the boundary's work (admission, record, table, view) runs
# partly beside them. It tells a slow machine's P6 from a slow host run.
bin=$(dirname "$(readlink -f "$(command -v gensee)")")
sandbox=("$bin/gensee-sandbox")
[ -x "$bin/gensee-sandbox" ] || sandbox=("$bin/gensee")
c=$(gensee_spawn_us gensee --version)
w=$(gensee_spawn_us "${sandbox[@]}" __gensee-host-linger)
t=$(gensee_spawn_us /bin/true)
case $c$w$t in
*[!0-9.]*) echo "P6 process starts: gensee --version $(gensee_us_ms "$c"), ${sandbox[0]##*/} $(gensee_us_ms "$w"), /bin/true $(gensee_us_ms "$t")" ;;
*) awk -v c="$c" -v w="$w" -v t="$t" -v b="${sandbox[0]##*/}" 'BEGIN{printf "P6 process starts, each alone from bash (medians of 50): gensee --version %.1f ms, %s %.1f ms, /bin/true %.1f ms; a host run starts gensee, then %s twice (its wrapper, then its stage), each from the one before: roughly %.1f ms of its added time (their sum less one bare spawn, which sh -c true pays too; the boundary'"'"'s work runs partly beside them)\n", c/1000, b, w/1000, t/1000, b, (c+2*w-t)/1000}' ;;
esac
