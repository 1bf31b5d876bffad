#!/usr/bin/env bash
# make release: into DIST (default dist/)
#   gensee-$VERSION-linux-$GOARCH.tar.gz          bin/ (the six binaries), share/man/man1, contrib/,
#                                                 docs/, README.md, LICENSE, VERSION, install.sh
#   gensee-installer-$VERSION-linux-$GOARCH.oci.tar  the DaemonSet installer image
#                                                 (contrib/kubernetes/installer), built from the tarball
#   gensee-$VERSION.intoto.json                   in-toto Statement v1, SLSA provenance v1 predicate,
#                                                 the two artifacts above as subjects
#   SHA256SUMS                                    sha256sum -c SHA256SUMS checks all three
# VERSION, GOARCH, LDFLAGS and TAGS come from the Makefile; SOURCE_DATE_EPOCH (default: the commit's
# time) dates the tarball entries and the man pages, so a rebuild of a clean tree is the same.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
: "${VERSION:?}" "${GOARCH:?}" "${DIST:?}" "${LDFLAGS:?}"
TAGS=${TAGS-grpcnotrace}
GO=${GO:-go}
BUILDER_ID=${BUILDER_ID:-https://github.com/gensee/gensee/hack/release.sh}
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

name=gensee-$VERSION-linux-$GOARCH
mkdir -p "$DIST"
work=$(mktemp -d "$DIST/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/$name
mkdir -p "$stage/bin" "$stage/share/man/man1"

# The shim front, the full shim, the gate helper, the OCI hook, the sandbox helper and the
# JSON Schema judge are static (CGO_ENABLED=0, as make build). The CLI keeps cgo, as make build, so its user
# lookups (boundary run --user, observe --user) go through NSS: it links glibc dynamically.
# CLI_CGO=0 makes it static too (users then come from /etc/passwd and /etc/group only).
build() {
	local cgo=$1 out=$2 pkg=$3
	echo "release: $out (CGO_ENABLED=$cgo)"
	CGO_ENABLED=$cgo GOOS=linux GOARCH=$GOARCH $GO build -trimpath -buildvcs=false -tags "$TAGS" -ldflags "$LDFLAGS" -o "$stage/bin/$out" "$pkg"
}
build "${CLI_CGO:-1}" gensee ./cmd/gensee
for b in containerd-shim-gensee-v2 gensee-shim gensee-gate-helper gensee-runc gensee-oci-hook gensee-sandbox gensee-verifier gensee-events gensee-node; do
	build 0 "$b" "./cmd/$b"
done
$GO run ./hack/genman -out "$stage/share/man/man1" -version "$VERSION" >/dev/null
cp -r contrib docs README.md LICENSE "$stage/"
cp hack/install.sh "$stage/install.sh"
echo "$VERSION" >"$stage/VERSION"
# Test sources are not part of the kit.
find "$stage/contrib" -name '*_test.go' -delete
find "$stage/contrib" -name '*.go' -delete

tarball=$name.tar.gz
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
	--mode='u+rw,go-w' -C "$work" -cf - "$name" | gzip -n -9 >"$DIST/$tarball"

# The installer image, from what the tarball holds (unpacked again, not from stage).
mkdir "$work/unpacked"
tar -xzf "$DIST/$tarball" -C "$work/unpacked"
image=gensee-installer-$VERSION-linux-$GOARCH.oci.tar
$GO run ./hack/release image -out "$DIST/$image" -bin "$work/unpacked/$name/bin" -busybox "${BUSYBOX:-/bin/busybox}" \
	-name "${INSTALLER_IMAGE:-registry.example.com/gensee/installer}:$VERSION" -goarch "$GOARCH"

stmt=gensee-$VERSION.intoto.json
$GO run ./hack/release provenance -out "$DIST/$stmt" -builder "$BUILDER_ID" -commit "$commit" \
	-version "$VERSION" -goarch "$GOARCH" -go-version "$($GO env GOVERSION)" -target release \
	-gosum go.sum -started "$started" "$DIST/$tarball" "$DIST/$image"

(cd "$DIST" && sha256sum "$tarball" "$image" "$stmt" >SHA256SUMS)
echo "release: $DIST/{$tarball,$image,$stmt,SHA256SUMS}"
