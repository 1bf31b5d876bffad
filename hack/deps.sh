#!/usr/bin/env bash
# Installs what building, testing and the demo need on a fresh Debian 12 machine:
# Debian packages, then the pinned third-party tools built from the Go module proxy
# into bin/. Idempotent: a tool already built at its pinned version is kept.
#
#   hack/deps.sh demo   what `make demo` runs: containerd, ctr, runc (make deps-demo)
#   hack/deps.sh [all]  everything `make test`, bench and conformance use too (make deps)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/bin
mkdir -p "$bin"
need=${1:-all}
case $need in
demo | all) ;;
*)
	echo "usage: hack/deps.sh [demo|all]" >&2
	exit 2
	;;
esac

# The demo's: the test image's busybox, and what building runc with seccomp takes.
pkgs=(busybox-static libseccomp-dev pkg-config gcc make git)
if [ "$need" = all ]; then
	pkgs+=(nftables iproute2 conntrack containernetworking-plugins podman sudo)
fi
# sudo: the host-run tests run gensee boundary run through it from a throwaway account (integration/hostrun_sudo_test.go).
# podman (4.3, with conmon and crun) drives the OCI hooks front door's tests; it pulls no containerd.
# The tests give it a private containers.conf/storage.conf (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF).
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: need root to install Debian packages: ${missing[*]}" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -x /usr/bin/containerd-shim-runc-v2 ]; then
	echo "deps: warning: /usr/bin/containerd-shim-runc-v2 exists (Debian's containerd 1.6?); gensee's tests put bin/ first on PATH" >&2
fi

# build NAME MODULE-DIR PACKAGE [extra go flags...]
build() {
	local name=$1 dir=$2 pkg=$3; shift 3
	local stamp=$bin/.$name.stamp sum
	sum=$( (cat "$top/integration/tools/$dir/go.mod" "$top/integration/tools/$dir/go.sum"; echo "CGO_ENABLED=${CGO_ENABLED-} $*") | sha256sum | cut -c1-16)
	if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
		return
	fi
	echo "deps: building $name"
	(cd "$top/integration/tools/$dir" && GOFLAGS=-mod=mod go build "$@" -o "$bin/$name" "$pkg")
	echo "$sum" >"$stamp"
}
build containerd containerd github.com/containerd/containerd/v2/cmd/containerd
build ctr containerd github.com/containerd/containerd/v2/cmd/ctr
CGO_ENABLED=1 build runc runc github.com/opencontainers/runc -tags seccomp
if [ "$need" = demo ]; then
	echo "deps: ok for the demo ($bin); make deps builds the test tools too"
	exit 0
fi
# The stock shim as containerd's own Makefile builds it (SHIM_CGO_ENABLED=0: static), the
# peer the benchmarks measure gensee's shim, built the same way, against.
CGO_ENABLED=0 build containerd-shim-runc-v2 containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
build crictl crictl sigs.k8s.io/cri-tools/cmd/crictl
build staticcheck staticcheck honnef.co/go/tools/cmd/staticcheck
# BuildKit for the builders integration (docs/builders.md). `go install ...@version` refuses
# buildkit (its go.mod has exclude directives), so it is a tool module like the others; the
# version is stamped from that module's go.mod so `buildkitd --version` is not v0.0.0+unknown.
bkver=$(awk '$1=="github.com/moby/buildkit" {print $2}' "$top/integration/tools/buildkit/go.mod")
CGO_ENABLED=0 build buildkitd buildkit github.com/moby/buildkit/cmd/buildkitd -ldflags "-X github.com/moby/buildkit/version.Version=$bkver"
CGO_ENABLED=0 build buildctl buildkit github.com/moby/buildkit/cmd/buildctl -ldflags "-X github.com/moby/buildkit/version.Version=$bkver"
echo "deps: ok ($bin)"
