# Shared by the demo, the benches and the conformance and Kubernetes
# scripts: a private containerd with the gensee runtime first on its PATH
# (source it; call gensee_daemon_start DIR and gensee_daemon_stop), the
# test image, trust material, the analyzer, and the benches' median and
# spawn timer. Nothing here touches the host's own containerd.

gensee_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gensee_bin=$gensee_top/bin
export PATH=$gensee_bin:$PATH:/usr/local/go/bin:/usr/sbin:/sbin

# gensee_daemon_start DIR: containerd with root, state and socket under DIR.
gensee_daemon_start() {
	local dir=$1
	GENSEE_SOCK=$dir/containerd.sock
	cat >"$dir/containerd.toml" <<TOML
version = 3
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.podsandbox.controller.v1", "io.containerd.sandbox.controller.v1.shim"]
[grpc]
  address = "$GENSEE_SOCK"
[ttrpc]
  address = "$GENSEE_SOCK.ttrpc"
TOML
	# Shims inherit the daemon's environment: DIR/etc is where a task may name an operator config.
	GENSEE_CONFIG_DIRS="$dir/etc" setsid "$gensee_bin/containerd" --config "$dir/containerd.toml" >"$dir/containerd.log" 2>&1 &
	GENSEE_DAEMON_PID=$!
	for _ in $(seq 1 150); do
		if "$gensee_bin/ctr" --address "$GENSEE_SOCK" version >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	echo "containerd did not start; log: $dir/containerd.log" >&2
	return 1
}

# gensee_ctr NS ARGS...: ctr against the private daemon.
gensee_ctr() {
	local ns=$1
	shift
	"$gensee_bin/ctr" --address "$GENSEE_SOCK" --namespace "$ns" "$@"
}

# gensee_daemon_stop DIR NS...: remove tasks and containers of each NS, stop
# the daemon, unmount anything left under DIR.
gensee_daemon_stop() {
	local dir=$1
	shift
	local ns id
	for ns in "$@"; do
		for id in $(gensee_ctr "$ns" tasks ls -q 2>/dev/null); do
			gensee_ctr "$ns" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
			gensee_ctr "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
		done
		for id in $(gensee_ctr "$ns" containers ls -q 2>/dev/null); do
			gensee_ctr "$ns" containers delete "$id" >/dev/null 2>&1 || true
		done
	done
	if [ -n "${GENSEE_DAEMON_PID:-}" ]; then
		kill "$GENSEE_DAEMON_PID" 2>/dev/null || true
		for _ in $(seq 1 75); do kill -0 "$GENSEE_DAEMON_PID" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$GENSEE_DAEMON_PID" 2>/dev/null || true
		GENSEE_DAEMON_PID=
	fi
	{ grep -o " $dir/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
	# runc leaves each namespace's parent cgroup (/<ns>) in every hierarchy.
	local mnt
	for mnt in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do
		for ns in "$@"; do rmdir "$mnt/$ns" 2>/dev/null || true; done
	done
}

# gensee_image DIR: build the probe and the test image archive into DIR.
gensee_image() {
	local dir=$1
	(cd "$gensee_top" && CGO_ENABLED=0 go build -o "$dir/probe" ./integration/probe &&
		go run ./integration/testimage/mkimage "$dir/image.tar" /bin/busybox "$dir/probe")
}

# gensee_trust DIR: a catalog key under DIR/keys, its public half as the trust
# anchor (root, 0400), a signed catalog routing namespaces demo (safe_default)
# and demo-strict (no safe_default) and host commands (runtime host, any user;
# an inference required), and DIR/etc/config.toml pointing at them.
gensee_trust() {
	local dir=$1
	install -d -m 0700 "$dir/etc" "$dir/keys"
	gensee catalog keygen --out "$dir/keys" >/dev/null
	install -m 0400 "$dir/keys/catalog-root-public-key.hex" "$dir/etc/catalog-root-public-key.hex"
	local analyzer_key now later
	analyzer_key=$(cat "$dir/keys/catalog-root-public-key.hex")
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	later=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	cat >"$dir/catalog.json" <<JSON
	{ "schema": "gensee.catalog/v1", "version": 1, "issued_at": "$now", "expires_at": "$later",
	  "contracts": { "offline-structured-result": {
	      "id": "offline-structured-result", "version": 1,
	      "network": { "mode": "deny_all" }, "workspace": "/workspace", "deadline": "15m",
	      "products": [ { "class": "structured_result", "slot": "out/result.json", "max_bytes": 65536, "modes": ["0644"] } ] } },
	  "analyzers": [ { "id": "ref-analyzer", "models": ["ref-model-1"], "public_key": "$analyzer_key", "rules_key": "$analyzer_key",
	                   "classes": ["build"], "min_confidence_bp": 8000, "min_margin_bp": 500, "max_lifetime": "1h" } ],
	  "selectors": [
	    { "id": "demo", "match": { "containerd_namespace": "demo", "runtime": "io.containerd.gensee.v2" },
	      "routes": { "build": "offline-structured-result" }, "safe_default": "offline-structured-result" },
	    { "id": "demo-strict", "match": { "containerd_namespace": "demo-strict", "runtime": "io.containerd.gensee.v2" },
	      "routes": { "build": "offline-structured-result" } },
	    { "id": "demo-analyzer", "match": { "containerd_namespace": "demo-analyzer", "runtime": "io.containerd.gensee.v2" },
	      "routes": { "build": "offline-structured-result" }, "volatile_env": ["HOSTNAME"],
	      "analyzer": { "id": "ref-analyzer", "endpoint": "$dir/analyzer.sock", "timeout": "200ms" } },
	    { "id": "demo-host", "match": { "runtime": "host" },
	      "routes": { "build": "offline-structured-result" } } ] }
JSON
	gensee catalog sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/catalog.json" --out "$dir/etc/catalog.signed.json"
	cat >"$dir/etc/config.toml" <<TOML
	catalog = "$dir/etc/catalog.signed.json"
	trust_anchor = "$dir/etc/catalog-root-public-key.hex"
	state_dir = "$dir/state"
	containerd_root = "$dir/root"
TOML
	chmod 0600 "$dir/etc/config.toml"
}

# gensee_analyzer DIR: start the node analyzer (gensee analyzer serve) for
# namespace demo-analyzer on DIR/analyzer.sock, with rules signed by the demo
# key (the demo catalog's analyzer and rules key): the image's busybox
# running /bin/true, or sh -c anything, is class "build". Sets
# GENSEE_ANALYZER_PID; gensee_analyzer_stop stops it.
gensee_analyzer() {
	local dir=$1 now later sum
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	later=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	sum=$(sha256sum /bin/busybox | cut -d' ' -f1)
	cat >"$dir/rules.json" <<JSON
	{ "schema": "gensee.analyzer-rules/v1", "analyzer": "ref-analyzer", "version": 1, "issued_at": "$now", "expires_at": "$later",
	  "rules": [ { "id": "true", "class": "build", "confidence_bp": 9000, "executable_sha256": ["$sum"], "argv": ["/bin/true"] },
	             { "id": "shell", "class": "build", "confidence_bp": 8500, "executable_sha256": ["$sum"], "argv": ["/bin/sh", "-c", "*"] } ] }
JSON
	gensee analyzer rules sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/rules.json" --out "$dir/etc/rules.dsse.json" >/dev/null
	gensee analyzer serve --config "$dir/etc/config.toml" --id ref-analyzer --rules "$dir/etc/rules.dsse.json" \
		--key "$dir/keys/catalog-root-private-key.hex" --model ref-model-1 --listen "$dir/analyzer.sock" 2>"$dir/analyzer.log" &
	GENSEE_ANALYZER_PID=$!
	local _
	for _ in $(seq 1 100); do [ -S "$dir/analyzer.sock" ] && return 0; sleep 0.05; done
	echo "gensee analyzer serve did not start:" >&2
	cat "$dir/analyzer.log" >&2
	return 1
}

gensee_analyzer_stop() {
	if [ -n "${GENSEE_ANALYZER_PID:-}" ]; then
		kill "$GENSEE_ANALYZER_PID" 2>/dev/null || true
		wait "$GENSEE_ANALYZER_PID" 2>/dev/null || true
		GENSEE_ANALYZER_PID=
	fi
}

# gensee_median: the median of the numbers on stdin, one a line (the
# benches' figures; LC_ALL=C for dotted ones). awk prints a median that
# is not a whole number with 6 significant digits.
gensee_median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# gensee_spawn_us CMD...: the median wall time in microseconds, from
# bash, of spawning CMD (fork, exec, wait), 50 runs, by bash's own clock
# ($EPOCHREALTIME's digits: no date(1) to exec, whatever the decimal
# separator). Says "not timed" without bash 5's $EPOCHREALTIME, and
# names a command that fails instead of timing it ("failed (exit N)").
gensee_spawn_us() {
	local i t0 ts=()
	if [ -z "${EPOCHREALTIME:-}" ]; then
		echo "not timed (bash $BASH_VERSION has no EPOCHREALTIME; bash 5 has)"
		return
	fi
	for ((i = 0; i < 50; i++)); do
		t0=${EPOCHREALTIME//[!0-9]/}
		"$@" >/dev/null 2>&1 || { echo "failed (exit $?)"; return; }
		ts+=($((${EPOCHREALTIME//[!0-9]/} - t0)))
	done
	printf '%s\n' "${ts[@]}" | gensee_median
}

# gensee_us_ms US: gensee_spawn_us's answer in milliseconds ("12.41 ms"),
# or its words as they are.
gensee_us_ms() {
	case $1 in
	*[!0-9.]* | "") echo "$1" ;;
	*) awk -v u="$1" 'BEGIN{printf "%.2f ms", u / 1000}' ;;
	esac
}
