#!/usr/bin/env bash
# make k8s-e2e: a private single-node Kubernetes cluster on this host, the gensee runtime
# behind its kubelet, and issue 29's scenarios run through it with kubectl, each asserted:
#   1. kube-proxy (nftables mode) makes Services work;
#   2. a Deployment of 2 replicas (RuntimeClass gensee; httpGet readiness and liveness
#      probes, an exec startup probe) under a contract with network.serve tcp/8080, behind
#      a Service another pod reaches; the manifests count what was served; kubectl exec
#      into a replica is recorded (execs.jsonl) and held to the contract;
#   3. a Job writes a structured_result product: its manifest, and the staged file's sha256;
#   4. a Job whose product fails the gate fails (gate_failed_exit_status 86);
#   5. a pod in a namespace whose selector refuses it: kubectl describe and get events show
#      the reason and the fix;
#   6. a deny_all pod's denied connection is in the node's records (and, when bin/gensee-node
#      is built, a Kubernetes Event: gensee-node serve --events runs for the whole run);
#   7. contrib's installer image built by BuildKit, the installer DaemonSet installs the
#      runtime into a scratch root.
#
# Components (make k8s-deps builds them into bin/k8s/, pinned in hack/k8s-build.sh):
# etcd, kube-apiserver (secure port on 127.0.0.1), kube-controller-manager,
# kube-scheduler, kubelet (cgroupfs driver), kube-proxy (nftables), kubectl with an admin
# kubeconfig; containerd v2.4.2 (make deps) with CRI, the stock runc handler and the gensee
# handler from contrib/containerd verbatim; buildkitd (make deps) for scenario 7; the bridge
# CNI on an address range nobody else uses, with no default route (only the Service range
# is routed, to the node) and no masquerade but kube-proxy's: traffic stays on loopback, the
# bridge and the pods' netns. Certificates come from a throwaway CA (hack/k8s-e2e-tool),
# images are built locally and imported into containerd's k8s.io namespace (no registry),
# and the catalog is signed by a throwaway key.
#
# Everything is private to the run and removed at exit, pass, fail or Ctrl-C: processes,
# mounts, cgroups the kubelet and runc made, the bridge and its veths, gensee tables and
# kube-proxy's (nft list tables is compared before and after), the sysctls the kubelet,
# kube-proxy and the bridge plugin change (restored), the kubelet's symlinks in
# /var/log/containers. Logs stay in bin/k8s-e2e/. Needs root. Hold the host's live-test
# lock around it when others run tests on the same host:
#   flock -o /tmp/gensee-live.lock make k8s-e2e
#
# K8S_E2E_HOLD=SECONDS keeps the cluster up that long before tearing it down (the admin
# kubeconfig's path is printed), for a look by hand.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "k8s-e2e: run as root (make k8s-e2e)" >&2; exit 1; }
top=$gensee_top bin=$gensee_bin k8s=$gensee_bin/k8s
out=$bin/k8s-e2e
node=gensee-e2e-node
sandbox_image=registry.k8s.io/pause:gensee-k8s-e2e
test_image=docker.io/gensee/k8s-e2e:latest
t_start=$SECONDS

say() { echo "k8s-e2e: [$((SECONDS - t_start))s] $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

for b in containerd ctr runc crictl containerd-shim-gensee-v2 gensee-shim gensee-gate-helper gensee-runc gensee buildkitd buildctl; do
	[ -x "$bin/$b" ] || die "$bin/$b missing: run make deps build"
done
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy cni/bridge cni/host-local cni/loopback; do
	[ -x "$k8s/$b" ] || die "$k8s/$b missing: run make k8s-deps"
done
[ -x /bin/busybox ] || die "/bin/busybox missing: run make deps (busybox-static)"

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
		[ "10.199.$x.0/24" = "${1:-}" ] && continue
		echo "10.199.$x.0/24"
		return
	done
	return 1
}

wait_for() { # TRIES CMD...: retry CMD every 0.5s
	local n=$1
	shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
	return 1
}

dir=$(mktemp -d /var/lib/gensee-k8s-XXXXXX)
chmod 0711 "$dir"
sock=$dir/containerd.sock
bridge=gk8s$$
net=gensee-k8s-$$
mkdir -p "$out" "$dir"/{pki,etc,keys,cni/net.d,cni/ipam,conf.d,build,logs,etcd,pod-logs,apiserver}
rm -f "$out"/*.log
pids=()

# --- what the run changes on the host, recorded before it starts ---
sysctls=(net/ipv4/ip_forward net/ipv6/conf/all/forwarding vm/overcommit_memory vm/panic_on_oom
	kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes
	net/netfilter/nf_conntrack_max net/netfilter/nf_conntrack_tcp_timeout_established
	net/netfilter/nf_conntrack_tcp_timeout_close_wait net/netfilter/nf_conntrack_tcp_be_liberal
	net/ipv4/conf/all/route_localnet)
declare -A snap_sysctl
for s in "${sysctls[@]}"; do snap_sysctl[$s]=$(cat "/proc/sys/$s" 2>/dev/null || true); done
snap_logdir=0
[ -d /var/log/containers ] && snap_logdir=1
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts; }
# The cgroups the kubelet (kubepods) and runc (k8s.io, CRI's containerd namespace) make.
cgroup_dirs() {
	local mnt d
	for mnt in $(cgroup_mounts); do
		for d in "$mnt/kubepods" "$mnt/kubepods.slice" "$mnt/k8s.io"; do
			if [ -d "$d" ]; then find "$d" -type d; fi
		done
	done | sort
}
snap_cgroups=$(cgroup_dirs)
new_cgroups() { cgroup_dirs | grep -vxF -e "$snap_cgroups" || true; }
# Host paths a kubelet or CNI writes by default; the run points each elsewhere.
host_paths=(/var/lib/kubelet /var/log/pods /etc/kubernetes /var/run/kubernetes /etc/cni /opt/cni /var/lib/etcd
	/run/buildkit /var/lib/buildkit)
snap_paths=$(for p in "${host_paths[@]}"; do [ -e "$p" ] && echo "$p"; done || true)
snap_nft=$(nft list tables 2>/dev/null || true)

stop_pid() { # PID: TERM, up to 15 s, KILL
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? pid c root t
	set +e
	trap - EXIT INT TERM
	say "tearing down"
	local t_down=$SECONDS
	# The kubelet first, so it restarts nothing; then every pod through CRI (its CNI DEL
	# releases the veths and addresses); then containerd and the control plane.
	[ -z "${kubelet_pid:-}" ] || stop_pid "$kubelet_pid"
	if [ -n "${containerd_pid:-}" ] && kill -0 "$containerd_pid" 2>/dev/null; then
		timeout 120 "$bin/crictl" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" rmp -fa >/dev/null 2>&1
		stop_pid "$containerd_pid"
	fi
	# Shims outlive their daemon; every one of this run names its socket.
	for pid in $(ps -eo pid=,args= | awk -v a="-address $sock " 'index($0 " ", a) {print $1}'); do
		kill -9 "$pid" 2>/dev/null
	done
	for root in "$dir"/runc-runc "$dir"/runc-runc/* "$dir"/runc-gensee "$dir"/runc-gensee/*; do
		[ -d "$root" ] || continue
		for c in $("$bin/runc" --root "$root" list -q 2>/dev/null); do
			"$bin/runc" --root "$root" kill "$c" KILL >/dev/null 2>&1
			"$bin/runc" --root "$root" delete -f "$c" >/dev/null 2>&1
		done
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[$i]}"; done

	# Mounts under the run's directory (rootfs, shm, netns, pod volumes), deepest first.
	{ grep -o " $dir/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done

	# The bridge and the host ends of veths still on it; CNI's result cache.
	if ip link show "$bridge" >/dev/null 2>&1; then
		for c in $(ip -o link show master "$bridge" | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$c"; done
		ip link del "$bridge"
	fi
	rm -f /var/lib/cni/results/"$net"-*
	# The host's conntrack entries of the run's addresses (probes, Services; they would expire).
	for c in ${pod_subnet:-} ${svc_subnet:-}; do
		conntrack -D --orig-src "${c%/24}" --mask-src 255.255.255.0 >/dev/null 2>&1
		conntrack -D --orig-dst "${c%/24}" --mask-dst 255.255.255.0 >/dev/null 2>&1
	done
	# gensee tables a pod left in the host netns: only those this run's records name.
	for t in $(nft -j list tables 2>/dev/null | grep -o '"name": *"gensee_[^"]*"' | cut -d'"' -f4); do
		grep -rqs "\"$t\"" "$dir/gensee-state" && nft delete table inet "$t" && say "removed leftover table $t"
	done

	# cgroups made during the run, deepest first (rmdir removes only empty ones).
	new_cgroups | sort -r | while read -r c; do rmdir "$c" 2>/dev/null; done
	# The sysctls: the kubelet sets kernel tunables (panic_on_oops, overcommit, ...), the
	# bridge plugin turns forwarding on.
	for s in "${sysctls[@]}"; do
		[ -z "${snap_sysctl[$s]}" ] || [ "$(cat "/proc/sys/$s")" = "${snap_sysctl[$s]}" ] ||
			echo "${snap_sysctl[$s]}" >"/proc/sys/$s"
	done
	# The device-plugin socket's directory is fixed: /var/lib/kubelet/device-plugins.
	if grep -qxF /var/lib/kubelet <<<"$snap_paths"; then
		rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	else
		rm -rf /var/lib/kubelet
	fi
	# kube-proxy's own tables (nftables mode: ip and ip6 "kube-proxy"), when new: it leaves
	# them at exit.
	nft list tables 2>/dev/null | grep -vxF -e "$snap_nft" | while read -r _ fam name; do
		[ "$name" = kube-proxy ] && nft delete table "$fam" "$name" && say "removed table $fam $name"
	done
	# Tables with KUBE- chains that were not there before (kubelet util chains, should
	# makeIPTablesUtilChains ever be on).
	nft list tables 2>/dev/null | grep -vxF -e "$snap_nft" | while read -r _ fam name; do
		nft list table "$fam" "$name" 2>/dev/null | grep -q 'chain KUBE-' && nft delete table "$fam" "$name" && say "removed table $fam $name"
	done
	# The kubelet's legacy log symlinks point into the run's pod log directory.
	if [ -d /var/log/containers ]; then
		find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete
		[ "$snap_logdir" = 1 ] || rmdir /var/log/containers 2>/dev/null
	fi

	for f in "$dir"/logs/*.log; do [ -e "$f" ] && cp "$f" "$out/"; done
	rm -rf "$dir"
	check_left
	say "torn down in $((SECONDS - t_down))s"
	exit "$rc"
}

check_left() {
	local left=() cg nt
	cg=$(new_cgroups | tr '\n' ' ')
	[ -z "$cg" ] || left+=("cgroups $cg")
	ps -eo args= | grep -F -- "$dir" | grep -vq grep && left+=("processes naming $dir")
	grep -qF " $dir" /proc/self/mounts && left+=("mounts under $dir")
	[ -e "$dir" ] && left+=("$dir")
	ip link show "$bridge" >/dev/null 2>&1 && left+=("bridge $bridge")
	for p in "${host_paths[@]}"; do
		[ -e "$p" ] && ! grep -qxF -e "$p" <<<"$snap_paths" && left+=("$p")
	done
	nt=$(nft list tables 2>/dev/null | grep -vxF -e "$snap_nft" | tr '\n' ' ')
	[ -z "$nt" ] || left+=("nft tables $nt")
	if [ ${#left[@]} -gt 0 ]; then
		say "LEFT BEHIND: ${left[*]}"
		return 1
	fi
}
trap 'exit 130' INT
trap 'exit 143' TERM
trap cleanup EXIT

# --- addresses, ports, certificates ---
pod_subnet=$(free_subnet)
svc_subnet=$(free_subnet "$pod_subnet")
pod_prefix=${pod_subnet%.0/24}
node_ip=$pod_prefix.1 # the bridge's address: the node's InternalIP, reachable from pods
svc_ip=${svc_subnet%.0/24}.1
web_ip=${svc_subnet%.0/24}.80 # the ClusterIP of Service web/web (scenario 2), fixed: a contract names it
etcd_port=$(free_port)
etcd_peer_port=$(free_port)
api_port=$(free_port)
kubelet_port=$(free_port)
kubelet_healthz_port=$(free_port)
proxy_healthz_port=$(free_port)
proxy_metrics_port=$(free_port)
say "dir $dir; pods $pod_subnet on $bridge (node $node_ip), services $svc_subnet, apiserver 127.0.0.1:$api_port"

say "building the helper, the images and the PKI"
(cd "$top" && go build -o "$dir/build/k8s-e2e-tool" ./hack/k8s-e2e-tool &&
	CGO_ENABLED=0 go build -o "$dir/build/probe" ./integration/probe &&
	go build -o "$dir/build/release" ./hack/release)
tool=$dir/build/k8s-e2e-tool
"$tool" pki "$dir/pki" "$node" "$node_ip" "$svc_ip"
"$tool" image "$dir/build/pause.tar" "$sandbox_image" /bin/busybox "$dir/build/probe" /bin/sleep 2147483647
"$tool" image "$dir/build/test.tar" "$test_image" /bin/busybox "$dir/build/probe"

kubeconfig() { # NAME USER: DIR/NAME.kubeconfig with the client certificate pki/USER.{crt,key}
	cat >"$dir/$1.kubeconfig" <<YML
apiVersion: v1
kind: Config
clusters:
- name: gensee-e2e
  cluster: { server: "https://127.0.0.1:$api_port", certificate-authority: "$dir/pki/ca.crt" }
users:
- name: $2
  user: { client-certificate: "$dir/pki/$2.crt", client-key: "$dir/pki/$2.key" }
contexts:
- name: gensee-e2e
  context: { cluster: gensee-e2e, user: $2 }
current-context: gensee-e2e
YML
	chmod 0600 "$dir/$1.kubeconfig"
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kube-proxy kube-proxy
kubeconfig kubelet kubelet
kubectl() { "$k8s/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }

# start NAME CMD...: in its own session, logging to DIR/logs/NAME.log.
start() {
	local name=$1
	shift
	setsid "$@" >"$dir/logs/$name.log" 2>&1 &
	pids+=($!)
}

# --- etcd and the control plane ---
t_cluster=$SECONDS
start etcd "$k8s/etcd" --name gensee-e2e --data-dir "$dir/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
	--initial-cluster "gensee-e2e=http://127.0.0.1:$etcd_peer_port" \
	--quota-backend-bytes 1073741824 --log-level warn
wait_for 60 curl -fsS "http://127.0.0.1:$etcd_port/health" || die "etcd did not start: $(tail -5 "$dir/logs/etcd.log")"
say "etcd up"

start kube-apiserver "$k8s/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$etcd_port" \
	--bind-address 127.0.0.1 --secure-port "$api_port" --advertise-address "$node_ip" --cert-dir "$dir/apiserver" \
	--tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
	--client-ca-file "$dir/pki/ca.crt" \
	--kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
	--service-cluster-ip-range "$svc_subnet" \
	--authorization-mode Node,RBAC --allow-privileged=true --profiling=false \
	--enable-admission-plugins NodeRestriction
api_ready() { [ "$(kubectl get --raw /readyz 2>/dev/null)" = ok ]; }
wait_for 240 api_ready || die "kube-apiserver not ready: $(tail -5 "$dir/logs/kube-apiserver.log")"
say "kube-apiserver ready"

start kube-controller-manager "$k8s/kube-controller-manager" \
	--kubeconfig "$dir/controller-manager.kubeconfig" --secure-port 0 --leader-elect=false \
	--service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
	--use-service-account-credentials=true --service-cluster-ip-range "$svc_subnet" --profiling=false
start kube-scheduler "$k8s/kube-scheduler" \
	--kubeconfig "$dir/scheduler.kubeconfig" --secure-port 0 --leader-elect=false --profiling=false

# --- the gensee runtime: a signed catalog, one selector per Kubernetes namespace ---
# default   the gensee-hello pod and the deny_all pod of scenario 6 (deny_all)
# web       the Deployment of scenario 2: serves tcp/8080 (network.serve), nothing out
# client    the pod that reaches web through its Service: tcp to the ClusterIP:80 only
# jobs      the Jobs of scenarios 3 and 4: a structured_result product at
#           /workspace/out/result.json (the pause container is admitted under it too, and
#           its gate fails at teardown for the missing product: a safe_default should
#           grant nothing, see docs/kubernetes.md; here it is what the Jobs get)
# strict    scenario 5: routes only, no safe_default: a pod without an inference is refused
gensee catalog keygen --out "$dir/keys" >/dev/null
gensee inference keygen --out "$dir/analyzer" >/dev/null
install -m 0400 "$dir/keys/catalog-root-public-key.hex" "$dir/etc/catalog-root-public-key.hex"
result_json='{"tests": 42, "failed": 0, "job": "result"}'
cat >"$dir/catalog.json" <<JSON
{ "schema": "gensee.catalog/v1", "version": 1,
  "issued_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "expires_at": "$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)",
  "contracts": {
    "k8s-e2e-deny": { "id": "k8s-e2e-deny", "version": 1, "network": { "mode": "deny_all" } },
    "k8s-e2e-web": { "id": "k8s-e2e-web", "version": 1,
      "network": { "mode": "deny_all", "serve": [{ "proto": "tcp", "port": 8080 }] } },
    "k8s-e2e-client": { "id": "k8s-e2e-client", "version": 1,
      "network": { "mode": "allow_exact", "allow": [{ "ip": "$web_ip", "proto": "tcp", "port": 80 }] } },
    "k8s-e2e-result": { "id": "k8s-e2e-result", "version": 1, "network": { "mode": "deny_all" },
      "workspace": "/workspace", "deadline": "5m",
      "products": [{ "class": "structured_result", "slot": "out/result.json", "max_bytes": 65536, "modes": ["0644"] }] } },
  "analyzers": [
    { "id": "k8s-e2e-analyzer", "models": ["k8s-e2e-model"], "public_key": "$(cat "$dir/analyzer/analyzer-public-key.hex")",
      "classes": ["test"], "min_confidence_bp": 8000, "min_margin_bp": 500, "max_lifetime": "1h" } ],
  "selectors": [
    { "id": "k8s-e2e", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2", "k8s_namespace": "default" },
      "safe_default": "k8s-e2e-deny" },
    { "id": "k8s-e2e-web", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2", "k8s_namespace": "web" },
      "safe_default": "k8s-e2e-web" },
    { "id": "k8s-e2e-client", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2", "k8s_namespace": "client" },
      "safe_default": "k8s-e2e-client" },
    { "id": "k8s-e2e-jobs", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2", "k8s_namespace": "jobs" },
      "safe_default": "k8s-e2e-result" },
    { "id": "k8s-e2e-strict", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2", "k8s_namespace": "strict" },
      "routes": { "test": "k8s-e2e-deny" } } ] }
JSON
gensee catalog sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/catalog.json" --out "$dir/etc/catalog.signed.json" >/dev/null
rm -f "$dir/keys/catalog-root-private-key.hex"
cat >"$dir/etc/config.toml" <<TOML
catalog = "$dir/etc/catalog.signed.json"
trust_anchor = "$dir/etc/catalog-root-public-key.hex"
state_dir = "$dir/gensee-state"
# A failed product gate is the Job's failure (scenario 4).
gate_failed_exit_status = 86
containerd_root = "$dir/containerd/root"
# The kubelet's pod directories (volumes, etc-hosts, termination-log) and CRI's per-pod
# hostname, resolv.conf and shm.
writable_bind_roots = ["$dir/kubelet/pods", "$dir/containerd/root/io.containerd.grpc.v1.cri/sandboxes", "$dir/containerd/state/io.containerd.grpc.v1.cri/sandboxes"]

[runc]
  SystemdCgroup = false
  BinaryName = "$bin/runc"
  Root = "$dir/runc-gensee"
TOML
chmod 0600 "$dir/etc/config.toml"
cp "$top/contrib/containerd/gensee-runtime.toml" "$dir/conf.d/gensee.toml" # verbatim

# --- the pods' network: the bridge made here, with the node's address on it ---
ip link add "$bridge" type bridge
ip addr add "$node_ip/24" dev "$bridge"
ip link set "$bridge" up
cat >"$dir/cni/net.d/10-gensee-k8s.conflist" <<JSON
{ "cniVersion": "1.0.0", "name": "$net", "plugins": [
  { "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$pod_subnet", "gateway": "$node_ip" }]],
              "routes": [{ "dst": "$svc_subnet" }], "dataDir": "$dir/cni/ipam" } } ] }
JSON

# --- containerd with CRI ---
cat >"$dir/containerd.toml" <<TOML
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
imports = ["$dir/conf.d/gensee.toml"]
# NRI's socket is host-wide and other daemons may hold it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  # The kubelet asks oom_score_adj -998 for pause containers; gensee refuses a score below
  # the runtime's own (oom_score_adj), and this makes CRI clamp it, as gensee's refusal says.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    conf_dir = "$dir/cni/net.d"
    bin_dirs = ["$k8s/cni"]
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

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
PATH=$bin:/usr/sbin:/usr/bin:/sbin:/bin GENSEE_CONFIG_DIRS=$dir/etc GENSEE_CONFIG=$dir/etc/config.toml \
	setsid "$bin/containerd" --config "$dir/containerd.toml" >"$dir/logs/containerd.log" 2>&1 &
containerd_pid=$!
crictl() { "$bin/crictl" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" "$@"; }
cri_ready() {
	local info
	info=$(crictl info | tr -d ' \n') || return 1
	[[ $info == *'"status":true,"type":"RuntimeReady"'* && $info == *'"status":true,"type":"NetworkReady"'* ]]
}
wait_for 60 cri_ready || die "CRI not ready: $(tail -5 "$dir/logs/containerd.log")"
for img in pause test; do
	"$bin/ctr" --address "$sock" --namespace k8s.io images import "$dir/build/$img.tar" >/dev/null
done
say "containerd ready; images imported"

# --- the kubelet ---
cat >"$dir/kubelet.yaml" <<YML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: "$dir/pki/ca.crt" }
authorization: { mode: Webhook }
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
# This host mounts cgroup v1 controllers with cgroup2 at /sys/fs/cgroup/unified (hybrid).
failCgroupV1: false
failSwapOn: false
podLogsDir: $dir/pod-logs
resolvConf: /etc/resolv.conf
# The disk is shared: no evictions for a host that is merely full of other things.
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# No KUBE-FIREWALL, KUBE-IPTABLES-HINT or canary chains: they are for kube-proxy and would
# be left in the host's tables.
makeIPTablesUtilChains: false
YML
start kubelet "$k8s/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
	--root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip" \
	--node-labels gensee.io/runtime=enabled --v 2
kubelet_pid=${pids[-1]}
unset 'pids[-1]'
node_ready() { [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
wait_for 240 node_ready || {
	kubectl describe node "$node" >&2 || true
	die "node not Ready: $(tail -5 "$dir/logs/kubelet.log")"
}
t_ready=$SECONDS
say "node $node Ready: cluster up in $((t_ready - t_cluster))s"
kubectl get nodes -o wide

# --- kube-proxy: Services, in nftables mode (tables ip and ip6 "kube-proxy") ---
# masqueradeAll: a pod's connection to a ClusterIP leaves the node with the node's address,
# so the reply comes back through the node's conntrack whether or not bridged traffic is
# filtered (br_netfilter). The conntrack tunables are left as they are (0), as is its own
# oom_score_adj; NodePorts only on the node's address.
cat >"$dir/kube-proxy.yaml" <<YML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: { kubeconfig: "$dir/kube-proxy.kubeconfig" }
hostnameOverride: $node
healthzBindAddress: 127.0.0.1:$proxy_healthz_port
metricsBindAddress: 127.0.0.1:$proxy_metrics_port
clusterCIDR: $pod_subnet
nodePortAddresses: ["$node_ip/32"]
nftables: { masqueradeAll: true }
oomScoreAdj: 0
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s }
YML
start kube-proxy "$k8s/kube-proxy" --config "$dir/kube-proxy.yaml" --v 2
proxy_ready() { curl -fsS "http://127.0.0.1:$proxy_healthz_port/healthz" && nft list table ip kube-proxy; }
wait_for 120 proxy_ready || die "kube-proxy not ready: $(tail -5 "$dir/logs/kube-proxy.log")"
say "kube-proxy ready (nftables: $(nft list tables | grep -c ' kube-proxy$') tables)"

# --- gensee-node: Kubernetes Events from the node's records (issue 29 item 2) ---
# When bin/gensee-node is built (make build) it follows the run's records for the whole run:
# metrics on a free port of 127.0.0.1, and Events (egress denials too) posted with the node's
# own credentials (the kubelet's kubeconfig: system:node:NODE, which the Node authorizer lets
# create Events); scenario 6 asserts the Event of the deny_all pod's denied connection.
# Without it the denial stays in the node's records (scenario 6 says so).
node_metrics_port=$(free_port)
if [ -x "$bin/gensee-node" ]; then
	mkdir -p "$dir/gensee-node"
	start gensee-node "$bin/gensee-node" serve --state-dir "$dir/gensee-state" --cursor-dir "$dir/gensee-node" \
		--listen "127.0.0.1:$node_metrics_port" --interval 500ms \
		--events --egress-events --kubeconfig "$dir/kubelet.kubeconfig" --node-name "$node"
	node_daemon_pid=${pids[-1]}
	wait_for 60 curl -fsS "http://127.0.0.1:$node_metrics_port/metrics" ||
		die "gensee-node serve not answering on 127.0.0.1:$node_metrics_port: $(tail -5 "$dir/logs/gensee-node.log")"
	say "gensee-node serve: metrics on 127.0.0.1:$node_metrics_port, Events on"
fi

# --- helpers for the scenarios ---
gsee() { gensee --config "$dir/etc/config.toml" -n k8s.io "$@"; }
# ctr_id NS POD [CONTAINER]: the container's containerd id (the pod's first container).
ctr_id() {
	local c
	c=$(kubectl -n "$1" get pod "$2" -o jsonpath="{.status.containerStatuses[${3:-0}].containerID}")
	echo "${c#containerd://}"
}
opdir() { echo "$dir/gensee-state/operations/$(cat "$dir/gensee-state/index/k8s.io/$1")"; }
manifest() { gsee manifest show --container "$1" --json; } # CID: manifest.json
has_manifest() { [ -s "$(opdir "$1")/manifest.json" ]; }
ns_create() {
	kubectl create namespace "$1" >/dev/null
	wait_for 120 kubectl -n "$1" get serviceaccount default || die "no default service account in $1"
}
declare -A outcome
scenario_ok() {
	outcome[$1]="ok ($((SECONDS - t_scn))s): $2"
	say "scenario $1 ok in $((SECONDS - t_scn))s: $2"
}

# --- RuntimeClass gensee and one pod through it ---
kubectl apply -f "$top/contrib/kubernetes/runtimeclass.yaml"
wait_for 120 kubectl -n default get serviceaccount default || die "no default service account"
kubectl apply -f - <<YML
apiVersion: v1
kind: Pod
metadata:
  name: gensee-hello
  namespace: default
spec:
  runtimeClassName: gensee
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: hello
    image: $test_image
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo hello from gensee; exec sleep 3600"]
YML
t_pod=$SECONDS
if ! kubectl -n default wait --for=condition=Ready pod/gensee-hello --timeout=120s; then
	kubectl -n default describe pod gensee-hello >&2 || true
	die "pod gensee-hello not Ready"
fi
pod_ready=$((SECONDS - t_pod))
say "pod gensee-hello Ready ${pod_ready}s after its creation"
kubectl -n default get pod gensee-hello -o wide
kubectl -n default logs gensee-hello
crictl ps -o table 2>/dev/null
# The pod went through gensee: its pause container and its container each an operation
# under the catalog's safe_default, running.
gsee ls
cid=$(crictl ps -q --name hello 2>/dev/null)
gsee ls --json | tr -d ' \n' |
	grep "\"container\":\"$cid\",\"contract\":\"k8s-e2e-deny\"" >/dev/null ||
	die "no gensee operation with contract k8s-e2e-deny for container $cid"
say "container $cid runs under gensee, contract k8s-e2e-deny"

# --- scenario 2: a Deployment behind a Service (network.serve), reached from another pod;
# kubectl exec into a replica, bound to its contract ---
t_scn=$SECONDS
say "scenario 2: Deployment web (2 replicas, httpGet readiness and liveness, exec startup probe) behind Service web ($web_ip:80)"
ns_create web
ns_create client
kubectl apply -f - <<YML
apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: web }
spec:
  replicas: 2
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      runtimeClassName: gensee
      terminationGracePeriodSeconds: 2
      containers:
      - name: httpd
        image: $test_image
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", 'mkdir -p /www && echo "gensee-web \$HOSTNAME" >/www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www']
        ports: [{ name: http, containerPort: 8080 }]
        startupProbe: { exec: { command: ["/bin/cat", "/www/index.html"] }, periodSeconds: 1, failureThreshold: 30 }
        readinessProbe: { httpGet: { path: /, port: 8080 }, periodSeconds: 2 }
        livenessProbe: { httpGet: { path: /index.html, port: 8080 }, periodSeconds: 3 }
---
apiVersion: v1
kind: Service
metadata: { name: web, namespace: web }
spec:
  clusterIP: $web_ip
  selector: { app: web }
  ports: [{ port: 80, targetPort: 8080, protocol: TCP }]
YML
if ! kubectl -n web rollout status deployment/web --timeout=120s; then
	kubectl -n web describe pods >&2 || true
	die "scenario 2: Deployment web not available"
fi
kubectl -n web get pods -o wide
mapfile -t web_pods < <(kubectl -n web get pods -l app=web -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
[ ${#web_pods[@]} = 2 ] || die "scenario 2: ${#web_pods[@]} web pods, want 2"
web_cids=()
for p in "${web_pods[@]}"; do
	c=$(ctr_id web "$p")
	web_cids+=("$c")
	[ "$(gsee ls --json | jq -r --arg c "$c" '.[] | select(.container == $c) | .contract')" = k8s-e2e-web ] ||
		die "scenario 2: replica $p ($c) is not under contract k8s-e2e-web"
	[ "$(kubectl -n web get pod "$p" -o jsonpath='{.status.containerStatuses[0].restartCount}')" = 0 ] ||
		die "scenario 2: replica $p restarted (a liveness probe failed?)"
done
ready_endpoints() {
	[ "$(kubectl -n web get endpointslices -l kubernetes.io/service-name=web -o json |
		jq '[.items[].endpoints[]? | select(.conditions.ready)] | length')" = 2 ]
}
wait_for 60 ready_endpoints || die "scenario 2: Service web has not 2 ready endpoints"
# The client: a pod of namespace client, whose contract allows exactly web's ClusterIP:80.
kubectl apply -f - <<YML
apiVersion: v1
kind: Pod
metadata: { name: client, namespace: client }
spec:
  runtimeClassName: gensee
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: client
    image: $test_image
    imagePullPolicy: Never
    command: ["/bin/sh", "-c"]
    args:
    - |
      n=0 ok=0
      while [ \$n -lt 60 ] && [ \$ok -lt 6 ]; do
        # (this busybox wget crashes with -T: the timeout is timeout(1)'s)
        if /bin/busybox timeout 3 wget -q -O- http://$web_ip/; then ok=\$((ok + 1)); fi
        n=\$((n + 1))
        sleep 0.5
      done
      echo "answers: \$ok of \$n"
      [ \$ok -ge 6 ]
YML
if ! kubectl -n client wait --for=jsonpath='{.status.phase}'=Succeeded pod/client --timeout=90s; then
	kubectl -n client describe pod client >&2 || true
	kubectl -n client logs client >&2 || true
	die "scenario 2: the client pod did not get 6 answers through Service web"
fi
kubectl -n client logs client
kubectl -n client logs client | grep "^gensee-web web-" >/dev/null || die "scenario 2: the client's answers are not web's pages"
client_cid=$(ctr_id client client)
wait_for 20 has_manifest "$client_cid" || die "scenario 2: no manifest for the client's container"
manifest "$client_cid" | jq -e --arg ip "$web_ip" '.contract.id == "k8s-e2e-client"' >/dev/null ||
	{ manifest "$client_cid" | jq -c .contract >&2; die "scenario 2: the client ran under another contract"; }

# kubectl exec into a replica: it works, it is recorded in the operation's execs.jsonl, and it
# is held to the replica's contract (a connection out is denied, the manifest counts it).
p=${web_pods[0]} c=${web_cids[0]}
execs=$(opdir "$c")/execs.jsonl
n_before=$(wc -l <"$execs" 2>/dev/null || echo 0)
got=$(kubectl -n web exec "$p" -c httpd -- /bin/cat /www/index.html) || die "scenario 2: kubectl exec into $p failed"
[ "$got" = "gensee-web $p" ] || die "scenario 2: kubectl exec into $p printed '$got'"
if kubectl -n web exec "$p" -c httpd -- /bin/probe connect tcp "$node_ip:$kubelet_port"; then
	die "scenario 2: an exec in $p connected to $node_ip:$kubelet_port (its contract is deny_all)"
fi
n_after=$(wc -l <"$execs")
[ "$n_after" -ge $((n_before + 2)) ] || die "scenario 2: $execs has $n_after lines, $n_before before 2 execs"
tail -n 1 "$execs" | jq -e '.no_new_privileges == true and (.capabilities_removed | any(startswith("CAP_NET_RAW")))' >/dev/null ||
	die "scenario 2: the last exec record is not bound: $(tail -n 1 "$execs")"
say "kubectl exec into $p: recorded and bound ($execs: $n_before -> $n_after lines; the last: $(tail -n 1 "$execs" | jq -c '{exec_id, capabilities_removed, no_new_privileges}'))"

# The replicas exit (scaled to 0): their manifests count what was served.
kubectl -n web scale deployment/web --replicas=0
for c in "${web_cids[@]}"; do
	wait_for 60 has_manifest "$c" || die "scenario 2: no manifest for replica container $c after scaling to 0"
done
served_total=0
for i in 0 1; do
	c=${web_cids[$i]}
	m=$(manifest "$c")
	jq -e '.enforcement.network.serve | any(.proto == "tcp" and .port == 8080)' <<<"$m" >/dev/null ||
		die "scenario 2: the manifest of ${web_pods[$i]} does not list network.serve tcp/8080: $(jq -c .enforcement.network <<<"$m")"
	conns=$(jq '.observation.served.connections // 0' <<<"$m")
	[ "$conns" -gt 0 ] || die "scenario 2: ${web_pods[$i]} served no connection: $(jq -c .observation.served <<<"$m")"
	served_total=$((served_total + conns))
	say "replica ${web_pods[$i]}: served $(jq -c .observation.served <<<"$m")"
done
m=$(manifest "${web_cids[0]}")
jq -e --arg t "$node_ip:$kubelet_port" '(.observation.denied_attempts.items // []) | any(.target == $t)' <<<"$m" >/dev/null ||
	die "scenario 2: the exec's denied connection to $node_ip:$kubelet_port is not in ${web_pods[0]}'s manifest: $(jq -c .observation <<<"$m")"
scenario_ok 2 "2 replicas Ready through httpGet and exec probes; the client got 6 answers through $web_ip:80; $served_total connections served (probes and client); exec recorded in execs.jsonl and its connection out denied"

# --- scenarios 3 and 4: Jobs whose container writes a structured_result product ---
# job NAME SCRIPT: a Job of namespace jobs (contract k8s-e2e-result), no retry.
job() {
	kubectl apply -f - <<YML
apiVersion: batch/v1
kind: Job
metadata: { name: $1, namespace: jobs }
spec:
  backoffLimit: 0
  template:
    spec:
      runtimeClassName: gensee
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      containers:
      - name: $1
        image: $test_image
        imagePullPolicy: Never
        command: ["/bin/sh", "-c"]
        args:
        - |
$(sed 's/^/          /' <<<"$2")
YML
}
job_pod() { kubectl -n jobs get pods -l "job-name=$1" -o jsonpath='{.items[0].metadata.name}'; }
ns_create jobs

t_scn=$SECONDS
say "scenario 3: Job result writes /workspace/out/result.json (structured_result)"
job result "mkdir -p /workspace/out
echo '$result_json' >/workspace/out/result.json"
if ! kubectl -n jobs wait --for=condition=Complete job/result --timeout=120s; then
	kubectl -n jobs describe job,pods >&2 || true
	die "scenario 3: Job result did not complete"
fi
c=$(ctr_id jobs "$(job_pod result)")
wait_for 20 has_manifest "$c" || die "scenario 3: no manifest for Job result's container $c"
gsee manifest show --container "$c"
m=$(manifest "$c")
want=$(echo "$result_json" | sha256sum | cut -d' ' -f1)
jq -e '.contract.id == "k8s-e2e-result" and .gate.verdict == "pass" and .exit_status == 0' <<<"$m" >/dev/null ||
	die "scenario 3: manifest of $c: $(jq -c '{contract, gate, exit_status}' <<<"$m")"
p=$(jq -c '.products[] | select(.slot == "out/result.json")' <<<"$m")
[ "$(jq -r .class <<<"$p")/$(jq -r .verdict <<<"$p")" = structured_result/pass ] || die "scenario 3: product $p"
[ "$(jq -r .sha256 <<<"$p")" = "$want" ] || die "scenario 3: product sha256 $(jq -r .sha256 <<<"$p"), want $want (sha256 of what the Job wrote)"
staged=$(opdir "$c")/$(jq -r .staged <<<"$p") # staged/out/result.json
[ -f "$staged" ] || die "scenario 3: no staged file $staged"
[ "$(sha256sum <"$staged" | cut -d' ' -f1)" = "$want" ] || die "scenario 3: $staged does not hash to $want"
ls -l "$(opdir "$c")" "$staged"
scenario_ok 3 "Job Complete; manifest: contract k8s-e2e-result, gate pass, structured_result out/result.json sha256 $want, staged at $staged with that sha256"

t_scn=$SECONDS
say "scenario 4: Job bad-result writes a result that is not JSON: the gate fails, so does the Job"
job bad-result "mkdir -p /workspace/out
echo 'this is not JSON' >/workspace/out/result.json"
if ! kubectl -n jobs wait --for=condition=Failed job/bad-result --timeout=120s; then
	kubectl -n jobs describe job,pods >&2 || true
	die "scenario 4: Job bad-result did not fail"
fi
p=$(job_pod bad-result)
code=$(kubectl -n jobs get pod "$p" -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
[ "$code" = 86 ] || die "scenario 4: pod $p exited $code, want 86 (gate_failed_exit_status)"
c=$(ctr_id jobs "$p")
m=$(manifest "$c")
jq -e '.gate.verdict == "fail" and .exit_status == 0' <<<"$m" >/dev/null ||
	die "scenario 4: manifest of $c: $(jq -c '{gate, exit_status}' <<<"$m")"
[ -z "$(ls -A "$(opdir "$c")/staged" 2>/dev/null)" ] || die "scenario 4: a failed product was staged: $(ls -A "$(opdir "$c")/staged")"
kubectl -n jobs get job bad-result -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'
scenario_ok 4 "gate fail ($(jq -c '[.gate.violations[]? | .rule // .reason // .message] | .[0:2]' <<<"$m")); the workload's status 0 reported as 86; Job Failed ($(kubectl -n jobs get job bad-result -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}'))"

# --- scenario 5: a namespace whose selector refuses a pod without an inference ---
t_scn=$SECONDS
say "scenario 5: pod refused in namespace strict (routes only, no safe_default)"
ns_create strict
kubectl apply -f - <<YML
apiVersion: v1
kind: Pod
metadata: { name: refused, namespace: strict }
spec:
  runtimeClassName: gensee
  restartPolicy: Never
  containers:
  - name: refused
    image: $test_image
    imagePullPolicy: Never
    command: ["/bin/sleep", "3600"]
YML
refusal_event() {
	kubectl -n strict get events --field-selector involvedObject.name=refused -o jsonpath='{.items[*].message}' |
		grep 'admission refused: no_inference' >/dev/null
}
wait_for 120 refusal_event || die "scenario 5: no event with the refusal for pod strict/refused"
kubectl -n strict get events --field-selector involvedObject.name=refused
desc=$(kubectl -n strict describe pod refused)
echo "$desc" | sed -n '/^Events:/,$p'
fix='give selector "k8s-e2e-strict" a safe_default'
for want in 'gensee: admission refused: no_inference' "$fix" FailedCreatePodSandBox; do
	grep -qF "$want" <<<"$desc" || die "scenario 5: kubectl describe pod strict/refused does not show '$want'"
	kubectl -n strict get events -o wide | grep -F "$want" >/dev/null || die "scenario 5: kubectl get events does not show '$want'"
done
[ "$(kubectl -n strict get pod refused -o jsonpath='{.status.phase}')" = Pending ] || die "scenario 5: pod strict/refused is not Pending"
gsee refusals --reason no_inference | tail -n 2
s5_node=""
if [ -n "${node_daemon_pid:-}" ]; then # gensee-node posts the refusal too, as its own Event
	node_refusal() {
		kubectl -n strict get events --field-selector involvedObject.name=refused,reason=GenseeAdmissionRefused \
			-o jsonpath='{.items[*].message}' | grep -F "$fix" >/dev/null
	}
	wait_for 60 node_refusal || die "scenario 5: no GenseeAdmissionRefused Event from gensee-node on strict/refused"
	s5_node="; gensee-node's GenseeAdmissionRefused Event with the same reason and fix"
fi
scenario_ok 5 "FailedCreatePodSandBox in describe and events: 'admission refused: no_inference' and the fix '$fix'$s5_node"

# --- scenario 6: a deny_all pod tries a connection ---
t_scn=$SECONDS
say "scenario 6: pod default/deny-probe (deny_all) connects to $web_ip:80"
kubectl apply -f - <<YML
apiVersion: v1
kind: Pod
metadata: { name: deny-probe, namespace: default }
spec:
  runtimeClassName: gensee
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: deny-probe
    image: $test_image
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "/bin/probe connect tcp $web_ip:80; echo connect-exit=\$?; exec /bin/sleep 3600"]
YML
probed() { kubectl -n default logs deny-probe | grep '^connect-exit=' >/dev/null; }
wait_for 120 probed || die "scenario 6: pod deny-probe did not try its connection"
kubectl -n default logs deny-probe | grep -x 'connect-exit=1' >/dev/null || die "scenario 6: the deny_all pod connected: $(kubectl -n default logs deny-probe)"
c=$(ctr_id default deny-probe)
denied_event() {
	local ev
	ev=$(gsee events --container "$c" --json 2>/dev/null) || true
	jq -se --arg t "$web_ip:80/tcp" 'any(.[]; .kind == "egress_denied" and .target == $t)' <<<"$ev" >/dev/null
}
wait_for 40 denied_event || die "scenario 6: no egress_denied event to $web_ip:80/tcp in the records of $c: $(gsee events --container "$c" --json 2>&1 | tail -3)"
{ gsee events --container "$c" || true; } | sed -n 1,4p
# gensee-node (when built) posts the denial as a Warning Event on the pod.
if [ -n "${node_daemon_pid:-}" ]; then
	node_event() {
		kubectl -n default get events --field-selector involvedObject.name=deny-probe -o jsonpath='{.items[*].reason} {.items[*].message}' |
			grep 'GenseeEgressDenied' >/dev/null
	}
	wait_for 60 node_event || die "scenario 6: gensee-node posted no Event for the denial: $(tail -5 "$dir/logs/gensee-node.log")"
	kubectl -n default get events --field-selector involvedObject.name=deny-probe
	scenario_ok 6 "denied connection to $web_ip:80: egress_denied in the node's records, and a Kubernetes Event by gensee-node"
else
	scenario_ok 6 "denied connection to $web_ip:80: egress_denied in the node's records (no Kubernetes Event: bin/gensee-node not built, TODO hook)"
fi

# --- scenario 7: the contrib installer DaemonSet puts the runtime on the node ---
# The image: contrib/kubernetes/installer/Containerfile built by BuildKit (the containerd
# worker of contrib/buildkit/buildkitd.toml, on this run's containerd) with no registry:
# its base image, docker.io/library/busybox:1.36-musl, is given as a named context from an
# OCI layout (the host's static busybox, as make release's installer image has it). The
# DaemonSet is contrib/kubernetes/install/daemonset.yaml with its four hostPath volumes
# moved to a scratch root under the run's directory (and its idle container on the run's
# pause image); the ConfigMap of node config is contrib's, the trust anchor and catalog are
# the run's.
t_scn=$SECONDS
installer_image=$(awk '$1 == "image:" && $2 ~ /installer/ {print $2; exit}' "$top/contrib/kubernetes/install/daemonset.yaml")
[ -n "$installer_image" ] || die "scenario 7: no installer image in contrib/kubernetes/install/daemonset.yaml"
say "scenario 7: installer image $installer_image through BuildKit, DaemonSet into a scratch root"
bk=$dir/buildkit
mkdir -p "$bk/ctx/bin" "$bk/base" "$bk/empty"
# The binaries the Containerfile copies (bin/X ... /opt/gensee/bin/), from make build.
installer_bins=$(awk '$1 == "COPY" {for (i = 2; i < NF; i++) if ($i ~ /^bin\//) print substr($i, 5)}' "$top/contrib/kubernetes/installer/Containerfile")
[ -n "$installer_bins" ] || die "scenario 7: no COPY bin/... in contrib/kubernetes/installer/Containerfile"
for b in $installer_bins; do
	[ -x "$bin/$b" ] || die "scenario 7: the Containerfile copies bin/$b, missing: run make build"
	cp "$bin/$b" "$bk/ctx/bin/"
done
"$dir/build/release" image -out "$bk/base.tar" -bin "$bk/empty" -busybox /bin/busybox -name docker.io/library/busybox:1.36-musl
tar -xf "$bk/base.tar" -C "$bk/base"
base_digest=$(jq -r '.manifests[0].digest' "$bk/base/index.json")
# The frontend looks a named context up by the FROM reference's familiar form.
bkcfg=$(cat "$top/contrib/buildkit/buildkitd.toml")
for r in "\"/var/lib/buildkit\"|\"$bk/root\"" "\"unix:///run/buildkit/buildkitd.sock\"|\"unix://$bk/buildkitd.sock\"" \
	"\"/run/containerd/containerd.sock\"|\"$sock\"" "\"/etc/gensee/config.toml\"|\"$dir/etc/config.toml\""; do
	[[ $bkcfg == *"${r%%|*}"* ]] || die "scenario 7: contrib/buildkit/buildkitd.toml no longer has ${r%%|*}"
	bkcfg=${bkcfg//"${r%%|*}"/"${r#*|}"}
done
echo "$bkcfg" >"$bk/buildkitd.toml"
PATH=$bin:/usr/sbin:/usr/bin:/sbin:/bin start buildkitd "$bin/buildkitd" --config "$bk/buildkitd.toml" --otel-socket-path "$bk/otel-grpc.sock"
buildkitd_pid=${pids[-1]}
buildctl() { "$bin/buildctl" --addr "unix://$bk/buildkitd.sock" "$@"; }
bk_ready() { buildctl debug workers | grep linux/ >/dev/null; }
wait_for 120 bk_ready || die "scenario 7: buildkitd not ready: $(tail -5 "$dir/logs/buildkitd.log")"
buildctl build --progress plain --frontend dockerfile.v0 \
	--local context="$bk/ctx" --local dockerfile="$top/contrib/kubernetes/installer" --opt filename=Containerfile \
	--oci-layout "base=$bk/base" --opt "context:busybox:1.36-musl=oci-layout://base@$base_digest" \
	--output "type=oci,dest=$bk/installer.tar,name=$installer_image" >"$dir/logs/buildctl.log" 2>&1 ||
	die "scenario 7: buildctl build failed: $(tail -15 "$dir/logs/buildctl.log")"
stop_pid "$buildkitd_pid"
"$bin/ctr" --address "$sock" --namespace k8s.io images import "$bk/installer.tar" >/dev/null
crictl images | grep -F "${installer_image%:*}" || die "scenario 7: $installer_image not in CRI's images after the import"
say "installer image built by BuildKit in $((SECONDS - t_scn))s and imported"

iroot=$dir/installer-root
mkdir -p "$iroot/usr/local/bin"
kubectl apply -f "$top/contrib/kubernetes/install/namespace.yaml" -f "$top/contrib/kubernetes/install/configmap.yaml"
kubectl -n gensee-system create secret generic gensee-trust-anchor \
	--from-file=catalog-root-public-key.hex="$dir/etc/catalog-root-public-key.hex"
kubectl -n gensee-system create configmap gensee-catalog --from-file=catalog.signed.json="$dir/etc/catalog.signed.json"
ds=$top/contrib/kubernetes/install/daemonset.yaml
sedargs=()
for r in "path: /usr/local/bin|path: $iroot/usr/local/bin" "path: /etc/gensee|path: $iroot/etc/gensee" \
	"path: /etc/containerd/conf.d|path: $iroot/etc/containerd/conf.d" "path: /var/lib/gensee|path: $iroot/var/lib/gensee" \
	"image: registry.k8s.io/pause:3.10|image: $sandbox_image"; do
	[ "$(grep -cxE " *${r%%|*}" "$ds")" = 1 ] || die "scenario 7: daemonset.yaml has not exactly one line '${r%%|*}'"
	sedargs+=(-e "s#^\( *\)${r%%|*}\$#\1${r#*|}#")
done
sed "${sedargs[@]}" "$ds" >"$dir/installer-daemonset.yaml"
kubectl apply -f "$dir/installer-daemonset.yaml"
if ! kubectl -n gensee-system rollout status daemonset/gensee-node-installer --timeout=120s; then
	kubectl -n gensee-system describe pods >&2 || true
	die "scenario 7: DaemonSet gensee-node-installer not ready"
fi
kubectl -n gensee-system logs daemonset/gensee-node-installer -c install
# What it installed: the image's binaries (the build's), the ConfigMaps' and the Secret's
# files, each with the owner and mode the DaemonSet's header promises.
check_file() { # PATH MODE SAME-AS
	[ -f "$1" ] || die "scenario 7: the installer did not write ${1#"$iroot"}"
	[ "$(stat -c '%a %u %g' "$1")" = "$2 0 0" ] || die "scenario 7: ${1#"$iroot"} is $(stat -c '%a %u %g' "$1"), want $2 root:root"
	cmp -s "$1" "$3" || die "scenario 7: ${1#"$iroot"} differs from $3"
}
for b in containerd-shim-gensee-v2 gensee-shim gensee-gate-helper gensee-runc gensee; do
	check_file "$iroot/usr/local/bin/$b" 755 "$bin/$b"
done
check_file "$iroot/etc/gensee/config.toml" 600 "$top/contrib/gensee/config.toml"
check_file "$iroot/etc/gensee/catalog-root-public-key.hex" 400 "$dir/etc/catalog-root-public-key.hex"
check_file "$iroot/etc/gensee/catalog.signed.json" 644 "$dir/etc/catalog.signed.json"
check_file "$iroot/etc/containerd/conf.d/gensee.toml" 644 "$top/contrib/containerd/gensee-runtime.toml"
[ "$(stat -c '%a %u %g' "$iroot/var/lib/gensee")" = "700 0 0" ] || die "scenario 7: /var/lib/gensee is $(stat -c '%a %u %g' "$iroot/var/lib/gensee")"
[ -z "$(find "$iroot" -name '*.gensee-new')" ] || die "scenario 7: temporary files left: $(find "$iroot" -name '*.gensee-new')"
"$iroot/usr/local/bin/gensee" catalog inspect --catalog "$iroot/etc/gensee/catalog.signed.json" \
	--trusted-key "$iroot/etc/gensee/catalog-root-public-key.hex" >/dev/null ||
	die "scenario 7: the installed gensee does not verify the installed catalog against the installed anchor"
find "$iroot" -printf '%M %u %-8s %P\n' | sort -k4
scenario_ok 7 "image by BuildKit (FROM busybox as an OCI-layout named context), DaemonSet ready, 4 binaries, config, anchor (0400), catalog and the containerd drop-in installed root-owned under $iroot; the installed CLI verifies the installed catalog"

# The metrics gensee-node counted over the run (issue 29 item 3), when it runs.
if [ -n "${node_daemon_pid:-}" ]; then
	say "gensee-node metrics (gensee_*) after the scenarios:"
	# The series every scenario must have moved (gensee-node polls every 500 ms, and a Job's
	# manifest may land just before this point).
	wanted=('gensee_refusals_total\{reason="no_inference",selector="k8s-e2e-strict"\}'
		'gensee_gate_verdicts_total\{class="structured_result",verdict="pass"\}'
		'gensee_gate_verdicts_total\{class="structured_result",verdict="fail"\}'
		'gensee_egress_denied_total\{contract="k8s-e2e-deny",selector="k8s-e2e"\}'
		'gensee_admissions_total\{contract="k8s-e2e-web",reason="[a-z_]*",selector="k8s-e2e-web"\}'
		'gensee_admission_bind_seconds_count')
	metrics_counted() {
		local want v
		metrics=$(curl -fsS "http://127.0.0.1:$node_metrics_port/metrics") || return 1
		for want in "${wanted[@]}"; do
			v=$(grep -E "^$want " <<<"$metrics" | awk '{print $NF; exit}')
			awk -v v="${v:-0}" 'BEGIN {exit !(v + 0 >= 1)}' || { missing="$want is ${v:-absent}"; return 1; }
		done
	}
	wait_for 20 metrics_counted || die "metrics: $missing after the scenarios; want at least 1"
	grep '^gensee_' <<<"$metrics"
	say "metrics: the run's refusal, gate verdicts (pass and fail), egress denials, admissions and latency are counted"
fi

if [ -n "${K8S_E2E_HOLD:-}" ]; then
	say "holding for ${K8S_E2E_HOLD}s: kubectl --kubeconfig $dir/admin.kubeconfig"
	sleep "$K8S_E2E_HOLD"
fi
for n in 2 3 4 5 6 7; do
	[ -z "${outcome[$n]:-}" ] || say "scenario $n: ${outcome[$n]}"
done
say "ok: cluster up in $((t_ready - t_cluster))s, pod Ready ${pod_ready}s after its creation, scenarios in $((SECONDS - t_ready))s"
