#!/usr/bin/env bash
# make k8s-deps: the components of the single-node cluster `make k8s-e2e` starts, built
# from source through the Go module proxy into bin/k8s/, pinned:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
#       k8s.io/kubernetes v1.37.2. Its module zip has neither staging/ nor vendor/ (both
#       are nested modules or dropped), and its go.mod replaces every k8s.io/* staging
#       module by ./staging/src/k8s.io/X: the build copies the module to a writable
#       directory, drops go.work and points each of those replaces at the k8s.io/X
#       v0.37.2 release instead (the release tags of the same commit), CGO_ENABLED=0.
#   etcd                go.etcd.io/etcd/server/v3 v3.7.3 (its main package; the module's
#                       go.mod replaces its siblings by path, so `go install` refuses it
#                       and it is built from a throwaway module that requires it). kine
#                       is not used: its sqlite backend needs cgo, and etcd is the real
#                       thing.
#   cni/bridge cni/host-local cni/loopback cni/portmap
#                       github.com/containernetworking/plugins v1.10.0 (CNI plugins, in
#                       their own directory: a CNI bin_dirs entry)
#
# Idempotent: bin/k8s/.stamp holds the pinned versions and the Go version of the last
# complete build; when it matches and every binary is there nothing is rebuilt. Builds
# run under nice -n 19 (2 CPUs shared with benchmarks). Needs only the Go module proxy.
# K8S_BUILD_JOBS sets go build -p (default 2).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/bin/k8s
k8s_version=v1.37.2
staging_version=v0.37.2
etcd_version=v3.7.3
cni_version=v1.10.0
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
cni_plugins=(main/bridge ipam/host-local main/loopback meta/portmap)
all=("${k8s_cmds[@]}" etcd cni/bridge cni/host-local cni/loopback cni/portmap)

say() { echo "k8s-deps: $*" >&2; }
stamp_want="kubernetes=$k8s_version staging=$staging_version etcd=$etcd_version cni=$cni_version $(go env GOVERSION)"
complete() {
	local b
	[ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp_want" ] || return 1
	for b in "${all[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if complete; then
	say "ok: $stamp_want ($out)"
	exit 0
fi
mkdir -p "$out/cni"
rm -f "$out/.stamp"
work=$(mktemp -d /var/tmp/gensee-k8s-build-XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0
jobs=${K8S_BUILD_JOBS:-2}
gobuild() { nice -n 19 go build -p "$jobs" -trimpath "$@"; }
t0=$SECONDS

# Kubernetes.
say "fetching k8s.io/kubernetes@$k8s_version"
src=$(go mod download -json "k8s.io/kubernetes@$k8s_version" | awk -F'"' '$2 == "Dir" {print $4}')
[ -n "$src" ] && [ -f "$src/go.mod" ] || { say "k8s.io/kubernetes@$k8s_version: no module directory"; exit 1; }
cp -r "$src" "$work/kubernetes"
chmod -R u+w "$work/kubernetes"
cd "$work/kubernetes"
rm -f go.work go.work.sum
sed -i -E "s#^([[:space:]]*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+\$#\1\2 => \2 $staging_version#" go.mod
if grep -q '=> \./staging' go.mod; then
	say "go.mod still replaces by path: $(grep '=> \./staging' go.mod | tr -s ' \t' ' ')"
	exit 1
fi
# What hack/lib/version.sh stamps into a release build (kubectl version, the kubelet's
# node status, the apiserver's /version).
build_date=$(grep -o '"Time":"[^"]*"' "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$k8s_version.info" 2>/dev/null | cut -d'"' -f4 || true)
minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"
done
for c in "${k8s_cmds[@]}"; do
	say "building $c $k8s_version"
	t=$SECONDS
	gobuild -ldflags "-s -w $ldflags" -o "$out/$c" "./cmd/$c"
	say "built $c in $((SECONDS - t))s"
done
cd "$top"

# etcd, from a throwaway module requiring the server module.
say "building etcd $etcd_version"
t=$SECONDS
mkdir -p "$work/etcd"
cd "$work/etcd"
cat >go.mod <<MOD
module gensee.local/k8s-etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $etcd_version
MOD
go mod download "go.etcd.io/etcd/server/v3@$etcd_version"
gobuild -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
say "built etcd in $((SECONDS - t))s"
cd "$top"

# CNI plugins: their module has no replace directives, so go install works.
say "building CNI plugins $cni_version"
t=$SECONDS
gobin=$work/cni-bin
mkdir -p "$gobin"
for p in "${cni_plugins[@]}"; do
	GOBIN=$gobin nice -n 19 go install -p "$jobs" -trimpath -ldflags "-s -w" \
		"github.com/containernetworking/plugins/plugins/$p@$cni_version"
	install -m 0755 "$gobin/${p#*/}" "$out/cni/${p#*/}"
done
say "built CNI plugins in $((SECONDS - t))s"

echo "$stamp_want" >"$out/.stamp"
say "ok in $((SECONDS - t0))s: $stamp_want ($out)"
