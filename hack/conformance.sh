#!/usr/bin/env bash
# make conformance: the Kubernetes CRI validation suite (critest) against a private
# containerd, once with the stock runc handler and once with the gensee handler, then the
# specs whose outcome differs. Exit 0 when every spec that passes under runc passes under
# gensee too, except the intended refusals in hack/conformance-expected.txt; 1 otherwise.
#
# Everything is private to this run and removed at exit, pass, fail or Ctrl-C: a registry
# on 127.0.0.1 holding the images critest pulls (built from busybox-static by
# hack/conformance-images), containerd with CRI (its own root, state, sockets, netns
# mounts, runc roots), a bridge CNI (Debian's containernetworking-plugins) on an address
# range nobody else uses, with no default route in the pods: traffic stays on loopback,
# the bridge and the pods' netns. Reports stay in bin/conformance/. Needs root.
# CONFORMANCE_FOCUS=REGEX runs only the matching specs (ginkgo --focus), for a quick look.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "conformance: run as root (make conformance)" >&2; exit 1; }
top=$gensee_top bin=$gensee_bin
out=$bin/conformance
sandbox_image=registry.k8s.io/pause:gensee-conformance
mirrored=(registry.k8s.io gcr.io k8s.gcr.io)

say() { echo "conformance: $*" >&2; }

# tool NAME MODULE-DIR PACKAGE: build a pinned tool from integration/tools/DIR into bin/,
# stamped by its module's go.mod and go.sum so a tool at its pinned version is kept.
tool() {
	local name=$1 mod=$top/integration/tools/$2 pkg=$3 sum
	sum=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
	[ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.stamp" 2>/dev/null)" = "$sum" ] && return
	say "building $name"
	(cd "$mod" && GOFLAGS=-mod=mod go build -trimpath -o "$bin/$name" "$pkg")
	echo "$sum" >"$bin/.$name.stamp"
}

# critest_build: critest's cmd/critest holds only test files, so it is built with
# `go test -c` in a writable copy of the pinned module, under the module's own go.sum.
critest_build() {
	local mod=$top/integration/tools/critest sum src version
	sum=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
	[ -x "$bin/critest" ] && [ "$(cat "$bin/.critest.stamp" 2>/dev/null)" = "$sum" ] && return
	version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/cri-tools" {print $3}' "$mod/go.mod")
	say "building critest $version"
	src=$(cd "$mod" && GOFLAGS=-mod=mod go mod download -json sigs.k8s.io/cri-tools | awk -F'"' '$2 == "Dir" {print $4}')
	local tmp
	tmp=$(mktemp -d)
	cp -r "$src/." "$tmp" && chmod -R u+w "$tmp"
	(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go test -c -trimpath \
		-ldflags "-X sigs.k8s.io/cri-tools/pkg/version.Version=$version" -o "$bin/critest" ./cmd/critest) ||
		{ rm -rf "$tmp"; return 1; }
	rm -rf "$tmp"
	echo "$sum" >"$bin/.critest.stamp"
}

# free_port: a TCP port nothing listens on (checked, not reserved).
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	return 1
}

# free_subnet: a 10.199.X.0/24 no address or route on this host is in.
free_subnet() {
	local x
	for _ in $(seq 1 50); do
		x=$((RANDOM % 250 + 1))
		ip -4 route show table all | grep -q "10\.199\.$x\." && continue
		ip -4 -o addr | grep -q "10\.199\.$x\." && continue
		echo "10.199.$x.0/24"
		return
	done
	return 1
}

wait_for() { # TRIES CMD...: retry CMD every 0.2s
	local n=$1
	shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}

for b in containerd ctr runc crictl containerd-shim-runc-v2 containerd-shim-gensee-v2 gensee-shim gensee; do
	[ -x "$bin/$b" ] || { say "$bin/$b missing: run make deps build"; exit 1; }
done
critest_build
tool registry registry github.com/distribution/distribution/v3/cmd/registry

dir=$(mktemp -d /var/lib/gensee-conformance-XXXXXX)
chmod 0711 "$dir"
sock=$dir/containerd.sock
net=gensee-conformance-$$
bridge=gcf$$
mkdir -p "$out" "$dir"/{etc,keys,tmp,cni/net.d,cni/ipam,certs.d,registry,conf.d,build}
. "$top/hack/conformance-cleanup.sh"
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'conformance_cleanup' EXIT
conformance_snapshot

say "building the helpers and the images"
(cd "$top" && go build -o "$dir/build/conformance-images" ./hack/conformance-images &&
	go build -o "$dir/build/conformance-report" ./hack/conformance-report &&
	CGO_ENABLED=0 go build -o "$dir/build/euid" ./hack/conformance-images/euid)

port=$(free_port)
cat >"$dir/registry.yml" <<YML
version: 0.1
log: { level: warn }
storage: { filesystem: { rootdirectory: $dir/registry }, delete: { enabled: true } }
http: { addr: 127.0.0.1:$port }
YML
OTEL_TRACES_EXPORTER=none setsid "$bin/registry" serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 &
registry_pid=$!
wait_for 100 curl -fsS "http://127.0.0.1:$port/v2/" || { say "registry did not start: $(tail -5 "$dir/registry.log")"; exit 1; }
"$dir/build/conformance-images" -registry "127.0.0.1:$port" -busybox /bin/busybox -euid "$dir/build/euid" \
	-sandbox "$sandbox_image" >"$dir/images.txt"
say "pushed $(wc -l <"$dir/images.txt") image references to 127.0.0.1:$port"
for host in "${mirrored[@]}"; do
	mkdir -p "$dir/certs.d/$host"
	cat >"$dir/certs.d/$host/hosts.toml" <<TOML
server = "https://$host"
[host."http://127.0.0.1:$port/v2/$host"]
  capabilities = ["pull", "resolve"]
  override_path = true
TOML
done

# The pods' network: no default route, no masquerade; portmap for hostPort specs.
subnet=$(free_subnet)
cat >"$dir/cni/net.d/10-conformance.conflist" <<JSON
{ "cniVersion": "1.0.0", "name": "$net", "plugins": [
  { "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$subnet" }]], "dataDir": "$dir/cni/ipam" } },
  { "type": "portmap", "capabilities": { "portMappings": true }, "snat": true } ] }
JSON

# The gensee handler: the contrib drop-in as an operator installs it; the shims find the
# operator config through GENSEE_CONFIG of the daemon (as contrib/systemd sets it), in a
# directory its GENSEE_CONFIG_DIRS lists; the catalog is signed by a throwaway key.
gensee catalog keygen --out "$dir/keys" >/dev/null
install -m 0400 "$dir/keys/catalog-root-public-key.hex" "$dir/etc/catalog-root-public-key.hex"
sed -e "s/@ISSUED_AT@/$(date -u +%Y-%m-%dT%H:%M:%SZ)/" -e "s/@EXPIRES_AT@/$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)/" \
	"$top/hack/conformance-catalog.json" >"$dir/catalog.json"
gensee catalog sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/catalog.json" --out "$dir/etc/catalog.signed.json" >/dev/null
rm -f "$dir/keys/catalog-root-private-key.hex"
cat >"$dir/etc/config.toml" <<TOML
catalog = "$dir/etc/catalog.signed.json"
trust_anchor = "$dir/etc/catalog-root-public-key.hex"
state_dir = "$dir/gensee-state"
# containerd's root: task snapshots are admitted as a rootfs only under it.
containerd_root = "$dir/root"
# CRI's per-pod hosts, hostname and resolv.conf, and the host paths critest mounts (its TMPDIR).
writable_bind_roots = ["$dir/root/io.containerd.grpc.v1.cri/sandboxes", "$dir/state/io.containerd.grpc.v1.cri/sandboxes", "$dir/tmp"]

[runc]
  SystemdCgroup = false
  BinaryName = "$bin/runc"
  Root = "$dir/runc-gensee"
TOML
chmod 0600 "$dir/etc/config.toml"
cp "$top/contrib/containerd/gensee-runtime.toml" "$dir/conf.d/gensee.toml" # verbatim

cat >"$dir/containerd.toml" <<TOML
version = 3
root = "$dir/root"
state = "$dir/state"
imports = ["$dir/conf.d/gensee.toml"]
# NRI's socket is host-wide and other daemons may hold it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  # critest, unlike the kubelet, sends no masked or readonly paths, and CRI then empties
  # containerd's own: every container would see /proc/kcore, /proc/keys, ... (gensee
  # refuses that: unmasked_proc). With this both handlers keep containerd's defaults (the
  # kubelet's list plus two), as kubelet pods get the kubelet's; critest's MaskedPaths and
  # ReadonlyPaths specs then fail under both handlers.
  disable_proc_mount = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    conf_dir = "$dir/cni/net.d"
    bin_dirs = ["/usr/lib/cni"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$bin/runc"
        Root = "$dir/runc-runc"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "$sandbox_image"
[plugins."io.containerd.cri.v1.images".registry]
  config_path = "$dir/certs.d"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
cat >"$dir/crictl.yaml" <<YML
runtime-endpoint: unix://$sock
image-endpoint: unix://$sock
timeout: 60
YML
crictl() { "$bin/crictl" --config "$dir/crictl.yaml" "$@"; }

say "starting containerd ($dir)"
PATH=$bin:/usr/sbin:/usr/bin:/sbin:/bin GENSEE_CONFIG_DIRS=$dir/etc GENSEE_CONFIG=$dir/etc/config.toml \
	setsid "$bin/containerd" --config "$dir/containerd.toml" >"$dir/containerd.log" 2>&1 &
containerd_pid=$!
cri_ready() {
	local info
	info=$(crictl info | tr -d ' \n') || return 1
	[[ $info == *'"status":true,"type":"RuntimeReady"'* && $info == *'"status":true,"type":"NetworkReady"'* ]]
}
wait_for 150 cri_ready || { say "CRI not ready: $(tail -5 "$dir/containerd.log")"; exit 1; }
crictl pull "$sandbox_image" >/dev/null

status=0
for handler in runc gensee; do
	say "critest --runtime-handler $handler (log: $out/$handler.log)"
	rm -f "$out/$handler.xml"
	# In the background and waited for: ginkgo catches SIGINT and would carry on with its
	# cleanup, and a foreground child that handles SIGINT keeps bash from acting on it;
	# `wait` returns at once on a trapped signal, and conformance_cleanup kills critest.
	TMPDIR=$dir/tmp "$bin/critest" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" \
		--runtime-handler "$handler" --ginkgo.no-color --ginkgo.junit-report "$out/$handler.xml" \
		${CONFORMANCE_FOCUS:+--ginkgo.focus "$CONFORMANCE_FOCUS"} \
		>"$out/$handler.log" 2>&1 &
	critest_pid=$!
	wait "$critest_pid" || true
	critest_pid=
	[ -s "$out/$handler.xml" ] || { say "critest wrote no report for $handler: $(tail -5 "$out/$handler.log")"; exit 1; }
	crictl rmp -fa >/dev/null 2>&1 || true
done
"$dir/build/conformance-report" -expected "$top/hack/conformance-expected.txt" \
	-base "runc=$out/runc.xml" -test "gensee=$out/gensee.xml" | tee "$out/summary.txt" || status=$?
exit "$status"
