#!/usr/bin/env bash
# Benchmarks against the peers the issues name, each in one run with the two
# contenders alternating, printing medians and ratios:
#   P1  `ctr run --rm` of a trivial container: gensee (deny_all) vs io.containerd.runc.v2
#   P1a the same under a contract of 1024 allow_exact tuples (the cap) vs
#       io.containerd.runc.v2, with deny_all beside it, in turns of three
#   P5  memory of one sleeping container: every process the runtime keeps for
#       it (shim, gate helper, monitors; VmRSS summed) vs the runc.v2 shim
#   P2  install of 10,000 allow_exact tuples into a fresh netns: gensee vs `nft -f`
#   P3  gate of a 1 GiB blob with staging vs the slower of sha256 of the same
#       bytes and a direct write of them (dd oflag=direct): both printed
#   P4  gate of a 100,000-file directory_tree (entries/s)
#   P6  a host run (gensee boundary run) of `sh -c true` vs `sh -c true`: time added
#   P7  `ctr run --rm` admitted through the node analyzer (gensee analyzer serve
#       on a unix socket) vs the same selector's safe_default without one: the
#       time the analyzer adds to Create, and the consult's own time from
#       admission.json (target <= 5 ms)
# Not a test: the figures go into the closing notes. Needs root.
#
# How to read the noise: every line gives medians and the spread of its
# samples (min, q1, q3, max). On the 2-vCPU VMs this runs on, one
# `ctr run` varies by +-10% from pair to pair and a neighbour's compile
# moves whole runs by more; the two contenders alternate pair by pair, so
# both see the same machine, and a ratio is read from the medians. A
# ratio is a result only when the two interquartile ranges do not swamp
# the difference it claims. P1 and P1a also give the ratio pair by pair
# (each run over the other contender's run beside it): its median and
# quartiles say how far the machine moved the headline ratio, which is
# the ratio of the medians. The bench itself keeps the load average
# near 1.5 (containerd, the shims, runc); the one printed at start is
# other work's (the bench waits up to 3 minutes for it to fall below
# 0.5), and a run that started above about 0.5 is not one to quote. Targets
# (issue 31): P1 <= 0.95, P1a <= 1.05 of runc.v2, P5 <= 1.15, P2 <= 0.40,
# P3 >= 0.90, P6 <= 30 ms added, P7 <= 5 ms.
# The host's own netfilter moves P1: where nothing in the host namespace
# uses it (these VMs: no table, no conntrack), each gensee container's
# table turns the kernel's global netfilter static keys on as it installs
# (its output hook, and conntrack's and defrag's hooks for its flow
# labels: kernel code patched, with an interrupt to every CPU) and off
# again when its namespace goes; runc.v2's containers touch none. On a
# node with a firewall, kube-proxy or a CNI's rules they are on already.
# The header says which (the host namespace's table count).
# The machine moves the lines in milliseconds, P6 most, more than the
# ratios: the "machine:" line, printed before P1, times from bash the
# spawn (fork, exec, wait) of /bin/true and of the gensee CLI's start
# (gensee --version), medians of 50 each. On the VMs the targets were
# set on, gensee --version took 4.6-5.1 ms (f383864, measured
# otherwise); on a guest where a page fault and an exec cost about three
# times as much (/bin/true 3.0-4.7 ms, gensee --version 11.6-15.9 ms
# from bash), P6's host run, which pays them in each of its processes,
# added 47-69 ms in four runs as the guest's speed drifted, while P1's
# ratio fell to 0.820-0.831 in the same runs (runc.v2's path pays them
# in more processes than gensee's). P6's second line times the same
# spawns again, beside P6, with gensee-sandbox's: the chain of process
# starts a host run makes (gensee, then gensee-sandbox as its wrapper
# and as its stage, each started by the one before) and gives roughly
# what they take of its added time: on that guest 31.1-35.3 ms in two
# runs, more than P6's 30 (gensee 17.8-20.5 ms, gensee-sandbox 8.6-9.3
# ms, less one bare spawn, /bin/true's 3.9 ms), where the host run added
# 66.9-67.5 ms. Numbers here are C-locale (LC_ALL=C below, and in
# bench-host.sh, which also runs alone): awk and sort read and print
# them with a dot.
# Profiling the shim: with a shim built by make build TAGS='grpcnotrace
# gensee_profile' (the aid is not compiled in otherwise),
# GENSEE_PROFILE=DIR in the daemon's environment (export
# it before this script; gensee_daemon_start passes it on) makes every gensee
# shim process write DIR/<time>-<pid>.usage.json (utime, stime, GC cycles,
# bytes allocated) and an allocation profile when it ends;
# GENSEE_PROFILE_CPU_HZ=N adds a CPU profile (go tool pprof);
# GENSEE_PROFILE_TRACE=1 an execution trace (go tool trace);
# GENSEE_PROFILE_HEAP_AFTER=3s a heap and a goroutine profile, the
# runtime's memory statistics and classes and /proc/self/smaps of the
# settled shim (P5). The shim's log carries per-phase
# wall times (checks_ms, catalog_ms, observe_ms, admission_ms,
# runc_create_ms, boundary_ms (of which baseline_ms, the gate's baseline
# of the upperdir, with baseline_entries); drain_ms, gate_ms (beside the
# network's end), status_ms, manifest_ms).
# Off by default.
set -euo pipefail
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "bench: run as root (make bench)" >&2; exit 1; }
# 100 pairs: a single run's spread here is about +-10%, and the ratio of
# the medians of 40 still moved by +-4% from one bench to the next (of 15,
# more); a pair takes about 0.3 s. More pairs do not narrow it further:
# P1's ratio moved by about +-0.025 from one bench to the next at the same
# code both at 100 pairs (0.904-0.955 over eight runs) and at 300
# (0.913-0.957 over three): what is left is whole runs shifting with the
# VM, not sampling.
pairs=${P1_PAIRS:-100}

dir=$(mktemp -d /var/lib/gensee-bench-XXXXXX)
trap 'gensee_daemon_stop "$dir" demo; rm -rf "$dir"' EXIT
gensee_trust "$dir" >/dev/null
# Namespace demo-allow runs under a contract of 1024 allow_exact tuples
# (spec's cap; TEST-NET-2 addresses nothing answers), re-signed.
jq '.contracts["allow-1024"] = (.contracts["offline-structured-result"] | .id = "allow-1024" |
	.network = {mode: "allow_exact", allow: [range(0; 1024) | {ip: "198.18.\(. / 256 | floor).\(. % 256)", proto: "tcp", port: 443}]}) |
	.selectors += [{id: "demo-allow", match: {containerd_namespace: "demo-allow", runtime: "io.containerd.gensee.v2"}, routes: {build: "allow-1024"}, safe_default: "allow-1024"}]' \
	"$dir/catalog.json" >"$dir/catalog-allow.json"
gensee catalog sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/catalog-allow.json" --out "$dir/etc/catalog.signed.json"
gensee_daemon_start "$dir"
gensee_image "$dir"
gensee_ctr demo images import "$dir/image.tar" >/dev/null
gensee_ctr demo-allow images import "$dir/image.tar" >/dev/null
gensee_ctr demo-analyzer images import "$dir/image.tar" >/dev/null
gensee_analyzer "$dir"
trap 'gensee_analyzer_stop; gensee_daemon_stop "$dir" demo; rm -rf "$dir"' EXIT

# ms T0: milliseconds since T0 (date +%s%N), to the hundredth: whole
# milliseconds put a step of up to 1% into the ratio of two ~100 ms
# medians.
ms() {
	local d=$(($(date +%s%N) - $1))
	printf '%d.%02d\n' $((d / 1000000)) $(((d / 10000) % 100))
}
run_once() { # RUNTIME ID [NAMESPACE]
	local t0 rt=$1 id=$2 ns=${3:-demo}
	local extra=()
	[ "$rt" = io.containerd.gensee.v2 ] && extra=(--runtime-config-path "$dir/etc/config.toml")
	t0=$(date +%s%N)
	gensee_ctr "$ns" run --rm --runtime "$rt" "${extra[@]}" docker.io/gensee/test:latest "$id" /bin/true >/dev/null 2>&1
	ms "$t0"
}
# spread: min..max and the interquartile range of the numbers on stdin.
spread() { sort -n | awk '{a[NR]=$1} END {printf "min %s, q1 %s, q3 %s, max %s", a[1], a[int((NR+3)/4)], a[int((3*NR+3)/4)], a[NR]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
# pairwise "A..." "B...": the ratio A[i]/B[i] of each pair, its median and
# quartiles.
pairwise() {
	paste -d' ' <(printf '%s\n' $1) <(printf '%s\n' $2) | awk '{print $1/$2}' | sort -n |
		awk '{a[NR]=$1} END {printf "pair by pair median %.3f, q1 %.3f, q3 %.3f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}

# rss_kib RUNTIME ID: start a sleeping container, let it settle, and sum the
# VmRSS of every process the runtime keeps for it: the shim (the init's
# parent) and its other descendants, not the container's own processes.
rss_kib() {
	local rt=$1 id=$2 extra=() init shim pids p sum=0
	[ "$rt" = io.containerd.gensee.v2 ] && extra=(--runtime-config-path "$dir/etc/config.toml")
	gensee_ctr demo run -d --runtime "$rt" "${extra[@]}" docker.io/gensee/test:latest "$id" /bin/sleep 60 >/dev/null 2>&1
	sleep "${P5_SETTLE:-2}"
	init=$(gensee_ctr demo tasks ls | awk -v id="$id" '$1 == id {print $2}')
	shim=$(awk '/^PPid:/ {print $2}' "/proc/$init/status")
	pids=$(descendants "$shim" "$init")
	for p in $shim $pids; do
		sum=$((sum + $(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	gensee_ctr demo tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	for _ in $(seq 1 50); do gensee_ctr demo tasks delete "$id" >/dev/null 2>&1 && break; sleep 0.1; done
	gensee_ctr demo containers delete "$id" >/dev/null 2>&1 || true
	echo "$sum"
}
# descendants PID SKIP: the descendants of PID, leaving out SKIP's subtree.
descendants() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		[ "$c" = "$2" ] && continue
		echo "$c"
		descendants "$c" "$2"
	done
}

# quiet: a quiet machine for the next line (see the header): the dirty
# pages of the lines before written back (a host run's fsyncs would queue
# behind a gigabyte of P3's), then up to BENCH_QUIET_WAIT seconds (180)
# for the 1-minute load average to fall below 0.5; the figure is printed
# either way.
quiet() {
	sync
	for ((w = 0; w < ${BENCH_QUIET_WAIT:-180}; w += 5)); do
		awk '{exit !($1 < 0.5)}' /proc/loadavg && break
		sleep 5
	done
}
quiet
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); host netfilter: $(nft list tables 2>/dev/null | wc -l) tables in the host namespace"
# machine: the machine line (see the header), printed before P1; P6's
# second line (bench-host.sh) times the same spawns beside P6.
machine() {
	if [ -z "${EPOCHREALTIME:-}" ]; then
		echo "machine: $(gensee_spawn_us /bin/true)"
		return
	fi
	echo "machine: spawn of /bin/true median $(gensee_us_ms "$(gensee_spawn_us /bin/true)"), gensee --version median $(gensee_us_ms "$(gensee_spawn_us gensee --version)") (50 runs each, from bash)"
}
machine
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
gm=$(printf '%s\n' "${g[@]}" | gensee_median)
rm_=$(printf '%s\n' "${r[@]}" | gensee_median)
p1="P1 ctr run --rm: gensee median ${gm} ms, runc.v2 median ${rm_} ms, ratio $(ratio "$gm" "$rm_") (target <= 0.95), $(pairwise "${g[*]}" "${r[*]}"); $pairs pairs; gensee $(printf '%s\n' "${g[@]}" | spread); runc.v2 $(printf '%s\n' "${r[@]}" | spread)"
echo "$p1"

echo "P1a: ctr run --rm /bin/true, 1024 allow_exact tuples vs runc.v2 and deny_all, $pairs alternating triples"
run_once io.containerd.gensee.v2 warm-a demo-allow >/dev/null
a=() d=() ar=()
for i in $(seq 1 "$pairs"); do
	# The three take turns at going first, so none always follows another.
	case $((i % 3)) in
	0) a+=("$(run_once io.containerd.gensee.v2 a$i demo-allow)"); ar+=("$(run_once io.containerd.runc.v2 ar$i)"); d+=("$(run_once io.containerd.gensee.v2 d$i)") ;;
	1) ar+=("$(run_once io.containerd.runc.v2 ar$i)"); d+=("$(run_once io.containerd.gensee.v2 d$i)"); a+=("$(run_once io.containerd.gensee.v2 a$i demo-allow)") ;;
	2) d+=("$(run_once io.containerd.gensee.v2 d$i)"); a+=("$(run_once io.containerd.gensee.v2 a$i demo-allow)"); ar+=("$(run_once io.containerd.runc.v2 ar$i)") ;;
	esac
done
am=$(printf '%s\n' "${a[@]}" | gensee_median)
dm=$(printf '%s\n' "${d[@]}" | gensee_median)
arm=$(printf '%s\n' "${ar[@]}" | gensee_median)
p1a="P1a ctr run --rm, 1024 allow tuples: median ${am} ms, runc.v2 median ${arm} ms, ratio $(ratio "$am" "$arm") (target <= 1.05), $(pairwise "${a[*]}" "${ar[*]}"); deny_all median ${dm} ms, allow/deny_all $(ratio "$am" "$dm"); $pairs triples; allow $(printf '%s\n' "${a[@]}" | spread); runc.v2 $(printf '%s\n' "${ar[@]}" | spread); deny_all $(printf '%s\n' "${d[@]}" | spread)"
echo "$p1a"

echo "P7: ctr run --rm /bin/true through the node analyzer vs the safe_default, $pairs alternating pairs"
run_once io.containerd.gensee.v2 warm-n demo-analyzer >/dev/null
n=() d=()
for i in $(seq 1 "$pairs"); do
	if [ $((i % 2)) = 0 ]; then
		d+=("$(run_once io.containerd.gensee.v2 e$i)"); n+=("$(run_once io.containerd.gensee.v2 n$i demo-analyzer)")
	else
		n+=("$(run_once io.containerd.gensee.v2 n$i demo-analyzer)"); d+=("$(run_once io.containerd.gensee.v2 e$i)")
	fi
done
nm=$(printf '%s\n' "${n[@]}" | gensee_median)
dm=$(printf '%s\n' "${d[@]}" | gensee_median)
# The consult's own time, as each admission.json recorded it (answered only).
took=$(cat "$dir"/state/operations/*/admission.json | jq -r 'select(.analyzer.outcome == "answered") | .analyzer.took_us')
tm=$(printf '%s\n' $took | gensee_median)
p7="P7 analyzer added to Create: ctr run median ${nm} ms vs ${dm} ms without (difference $(awk -v a="$nm" -v b="$dm" 'BEGIN{printf "%.1f", a-b}') ms, ratio $(ratio "$nm" "$dm")); consult median $(awk -v t="$tm" 'BEGIN{printf "%.2f", t/1000}') ms over $(printf '%s\n' $took | wc -l) answered ($(printf '%s\n' $took | spread) us) (target <= 5 ms); $pairs pairs; analyzer $(printf '%s\n' "${n[@]}" | spread); without $(printf '%s\n' "${d[@]}" | spread)"
echo "$p7"

p5pairs=${P5_PAIRS:-9}
echo "P5: memory of one sleeping container, $p5pairs alternating pairs"
g=() r=()
for i in $(seq 1 "$p5pairs"); do
	if [ $((i % 2)) = 0 ]; then
		r+=("$(rss_kib io.containerd.runc.v2 mr$i)"); g+=("$(rss_kib io.containerd.gensee.v2 mg$i)")
	else
		g+=("$(rss_kib io.containerd.gensee.v2 mg$i)"); r+=("$(rss_kib io.containerd.runc.v2 mr$i)")
	fi
done
gm=$(printf '%s\n' "${g[@]}" | gensee_median)
rm_=$(printf '%s\n' "${r[@]}" | gensee_median)
p5="P5 sleeping container, VmRSS of the runtime's processes: gensee median $((${gm%.*} / 1024)) MiB (${gm} KiB), runc.v2 median $((${rm_%.*} / 1024)) MiB (${rm_} KiB), ratio $(ratio "$gm" "$rm_") (target <= 1.15); $p5pairs pairs; gensee $(printf '%s\n' "${g[@]}" | spread) KiB; runc.v2 $(printf '%s\n' "${r[@]}" | spread) KiB"
echo "$p5"
gensee_analyzer_stop
gensee_daemon_stop "$dir" demo demo-allow demo-analyzer

cd "$gensee_top"
echo "P2: allow_exact install vs nft -f"
p2=$(./hack/bench-p2.sh 2>/dev/null || true)
echo "$p2"
echo "P3/P4: gate throughput"
p34=$(./hack/bench-gate.sh 2>/dev/null || true)
echo "$p34"
quiet
echo "P6: host run vs the bare command (load average $(cut -d' ' -f1-3 /proc/loadavg))"
p6=$(./hack/bench-host.sh 2>/dev/null || true)
echo "$p6"

echo
echo "== summary (load average at end: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "$p1" "$p1a" "$p7" "$p5" "$p2" "$p34" "$p6"
