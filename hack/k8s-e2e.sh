#!/usr/bin/env bash
# make k8s-e2e: a private single-node Kubernetes cluster on this host, the gensee runtime
# behind its kubelet, and a pod with runtimeClassName gensee run through it.
#
# Components (make k8s-deps builds them into bin/k8s/, pinned in hack/k8s-build.sh):
# etcd, kube-apiserver (secure port on 127.0.0.1), kube-controller-manager,
# kube-scheduler, kubelet (cgroupfs driver), kubectl with an admin kubeconfig; containerd
# v2.4.2 (make deps) with CRI, the stock runc handler and the gensee handler from
# contrib/containerd verbatim; the bridge CNI on an address range nobody else uses, with
# no default route and no masquerade: traffic stays on loopback, the bridge and the pods'
# netns. Certificates come from a throwaway CA (hack/k8s-e2e-tool), images are built
# locally and imported into containerd's k8s.io namespace (no registry), and the catalog
# is signed by a throwaway key.
#
# Everything is private to the run and removed at exit, pass, fail or Ctrl-C: processes,
# mounts, cgroups the kubelet and runc made, the bridge and its veths, gensee tables, the
# sysctls the kubelet and the bridge plugin change (restored), the kubelet's symlinks in
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

for b in containerd ctr runc crictl containerd-shim-gensee-v2 gensee-shim gensee-gate-helper gensee; do
	[ -x "$bin/$b" ] || die "$bin/$b missing: run make deps build"
done
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl cni/bridge cni/host-local cni/loopback; do
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
	kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)
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
host_paths=(/var/lib/kubelet /var/log/pods /etc/kubernetes /var/run/kubernetes /etc/cni /opt/cni /var/lib/etcd)
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
etcd_port=$(free_port)
etcd_peer_port=$(free_port)
api_port=$(free_port)
kubelet_port=$(free_port)
kubelet_healthz_port=$(free_port)
say "dir $dir; pods $pod_subnet on $bridge (node $node_ip), services $svc_subnet, apiserver 127.0.0.1:$api_port"

say "building the helper, the images and the PKI"
(cd "$top" && go build -o "$dir/build/k8s-e2e-tool" ./hack/k8s-e2e-tool &&
	CGO_ENABLED=0 go build -o "$dir/build/probe" ./integration/probe)
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

# --- the gensee runtime: a signed catalog routing CRI's containerd namespace ---
gensee catalog keygen --out "$dir/keys" >/dev/null
install -m 0400 "$dir/keys/catalog-root-public-key.hex" "$dir/etc/catalog-root-public-key.hex"
cat >"$dir/catalog.json" <<JSON
{ "schema": "gensee.catalog/v1", "version": 1,
  "issued_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "expires_at": "$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)",
  "contracts": {
    "k8s-e2e-deny": { "id": "k8s-e2e-deny", "version": 1, "network": { "mode": "deny_all" } } },
  "selectors": [
    { "id": "k8s-e2e", "match": { "containerd_namespace": "k8s.io", "runtime": "io.containerd.gensee.v2" },
      "safe_default": "k8s-e2e-deny" } ] }
JSON
gensee catalog sign --key "$dir/keys/catalog-root-private-key.hex" --in "$dir/catalog.json" --out "$dir/etc/catalog.signed.json" >/dev/null
rm -f "$dir/keys/catalog-root-private-key.hex"
cat >"$dir/etc/config.toml" <<TOML
catalog = "$dir/etc/catalog.signed.json"
trust_anchor = "$dir/etc/catalog-root-public-key.hex"
state_dir = "$dir/gensee-state"
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
              "dataDir": "$dir/cni/ipam" } } ] }
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
gensee ls -n k8s.io --config "$dir/etc/config.toml"
cid=$(crictl ps -q --name hello 2>/dev/null)
gensee ls -n k8s.io --config "$dir/etc/config.toml" --json | tr -d ' \n' |
	grep -q "\"container\":\"$cid\",\"contract\":\"k8s-e2e-deny\"" ||
	die "no gensee operation with contract k8s-e2e-deny for container $cid"
say "container $cid runs under gensee, contract k8s-e2e-deny"
if [ -n "${K8S_E2E_HOLD:-}" ]; then
	say "holding for ${K8S_E2E_HOLD}s: kubectl --kubeconfig $dir/admin.kubeconfig"
	sleep "$K8S_E2E_HOLD"
fi
say "ok: cluster up in $((t_ready - t_cluster))s, pod Ready ${pod_ready}s after its creation"
