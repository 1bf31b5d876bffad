#!/usr/bin/env bash
# make k8s-deps: the components of the single-node cluster `make k8s-e2e` starts, built
# from source through the Go module proxy into bin/k8s/, pinned:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy
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
# build; when it matches, only a binary that is missing is built (none: nothing is). Builds
# run under nice -n 19 (2 CPUs shared with benchmarks). Needs only the Go module proxy.
# K8S_BUILD_JOBS sets go build -p (default 2).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/bin/k8s
k8s_version=v1.37.2
staging_version=v0.37.2
etcd_version=v3.7.3
cni_version=v1.10.0
k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)
cni_plugins=(main/bridge ipam/host-local main/loopback meta/portmap)
all=("${k8s_cmds[@]}" etcd cni/bridge cni/host-local cni/loopback cni/portmap)

say() { echo "k8s-deps: $*" >&2; }
stamp_want="kubernetes=$k8s_version staging=$staging_version etcd=$etcd_version cni=$cni_version $(go env GOVERSION)"
# wanted NAME: NAME is to be built (missing, or built from other pins).
declare -A have
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp_want" ]; then
	for b in "${all[@]}"; do [ -x "$out/$b" ] && have[$b]=1; done
fi
wanted() { [ -z "${have[$1]:-}" ]; }
todo=0
for b in "${all[@]}"; do wanted "$b" && todo=$((todo + 1)); done
if [ "$todo" = 0 ]; then
	say "ok: $stamp_want ($out)"
	exit 0
fi
mkdir -p "$out/cni"
work=$(mktemp -d /var/tmp/gensee-k8s-build-XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0
jobs=${K8S_BUILD_JOBS:-2}
gobuild() { nice -n 19 go build -p "$jobs" -trimpath "$@"; }
t0=$SECONDS

# build_kubernetes CMD...: the Kubernetes commands, from a writable copy of the module.
build_kubernetes() {
	local src c t pkg build_date minor ldflags=""
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
	# What hack/lib/version.sh stamps into a release build (kubectl version, the
	# kubelet's node status, the apiserver's /version); the date is the module's.
	build_date=$(grep -o '"Time":"[^"]*"' "$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$k8s_version.info" 2>/dev/null | cut -d'"' -f4 || true)
	minor=${k8s_version#v1.}
	minor=${minor%%.*}
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"
	done
	for c in "$@"; do
		say "building $c $k8s_version"
		t=$SECONDS
		gobuild -ldflags "-s -w $ldflags" -o "$out/$c" "./cmd/$c"
		say "built $c in $((SECONDS - t))s"
	done
	cd "$top"
}

# build_etcd: etcd's main package, from a throwaway module requiring the server module.
build_etcd() {
	local t=$SECONDS
	say "building etcd $etcd_version"
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
}

# build_cni PLUGIN...: CNI plugins (main/bridge, ...); their module has no replace
# directives, so go install builds them.
build_cni() {
	local t=$SECONDS p gobin=$work/cni-bin
	say "building CNI plugins $cni_version: $*"
	mkdir -p "$gobin"
	for p in "$@"; do
		GOBIN=$gobin nice -n 19 go install -p "$jobs" -trimpath -ldflags "-s -w" \
			"github.com/containernetworking/plugins/plugins/$p@$cni_version"
		install -m 0755 "$gobin/${p#*/}" "$out/cni/${p#*/}"
	done
	say "built CNI plugins in $((SECONDS - t))s"
}

todo_k8s=() todo_cni=()
for c in "${k8s_cmds[@]}"; do wanted "$c" && todo_k8s+=("$c"); done
for p in "${cni_plugins[@]}"; do wanted "cni/${p#*/}" && todo_cni+=("$p"); done
[ ${#todo_k8s[@]} = 0 ] || build_kubernetes "${todo_k8s[@]}"
! wanted etcd || build_etcd
[ ${#todo_cni[@]} = 0 ] || build_cni "${todo_cni[@]}"

echo "$stamp_want" >"$out/.stamp"
say "ok in $((SECONDS - t0))s: $stamp_want ($out)"
