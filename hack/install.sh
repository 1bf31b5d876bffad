#!/usr/bin/env bash
# make install / make uninstall: hack/install.sh install|uninstall
#
# Installs the built binaries (BIN, default bin/) and the operator kit from contrib/ under
# DESTDIR (default empty) with PREFIX (default /usr/local) and SYSCONFDIR (default /etc):
#
#   $PREFIX/bin/{containerd-shim-gensee-v2,gensee-shim,gensee-gate-helper,gensee-runc,gensee-oci-hook,
#                gensee-sandbox,gensee-verifier,gensee-events,gensee,gensee-node}   0755, siblings (the front and
#                                                               the CLI open the others beside themselves)
#   $SYSCONFDIR/containerd/conf.d/gensee.toml                   containerd drop-in (CRI handler "gensee")
#   $SYSCONFDIR/systemd/system/containerd.service.d/10-gensee.conf   containerd's PATH
#   $SYSCONFDIR/systemd/system/gensee-verify.{service,timer}    hourly manifest verify --all (not enabled)
#   $SYSCONFDIR/systemd/system/gensee-analyzer.service          the node analyzer (not enabled)
#   $SYSCONFDIR/systemd/system/gensee-node.service              metrics and Kubernetes Events (not enabled)
#   $SYSCONFDIR/gensee/config.toml                              commented operator config, only if absent
#   $HOOKSDIR/gensee.json                                       podman's OCI hook (opt-in by annotation)
#   $PREFIX/share/man/man1/gensee*.1                            man pages from the command tree
#   $PREFIX/share/{bash-completion/completions/gensee,zsh/site-functions/_gensee,
#                  fish/vendor_completions.d/gensee.fish}       shell completions
#   $PREFIX/share/gensee/install-manifest                       what was installed, for uninstall
#
# HOOKSDIR defaults to /usr/share/containers/oci/hooks.d, the one directory podman reads by
# default (docs/hooks.md), whatever PREFIX is. Uninstall removes what the manifest lists; the
# operator config only when install created it and it is unchanged since.
#
# The release tarball carries this script as install.sh at its top, beside bin/, contrib/,
# share/man/man1 and VERSION: ./install.sh install installs the release.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/VERSION" ] && [ -d "$here/bin" ]; then
	top=$here # an unpacked release
	: "${MANPAGES:=$here/share/man/man1}" "${VERSION:=$(cat "$here/VERSION")}"
else
	top=$(cd "$here/.." && pwd)
fi
mode=${1:-}
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
SYSCONFDIR=${SYSCONFDIR:-/etc}
HOOKSDIR=${HOOKSDIR:-/usr/share/containers/oci/hooks.d}
BIN=${BIN:-$top/bin}
CONTRIB=${CONTRIB:-$top/contrib}
MANPAGES=${MANPAGES:-} # pre-generated pages (the release tarball's share/man/man1); else generated
VERSION=${VERSION:-dev}

binaries=(containerd-shim-gensee-v2 gensee-shim gensee-gate-helper gensee-runc gensee-oci-hook gensee-sandbox gensee-verifier gensee-events gensee gensee-node)
manifest=$PREFIX/share/gensee/install-manifest

die() {
	echo "install: $*" >&2
	exit 1
}
case $PREFIX in /*) ;; *) die "PREFIX must be absolute: $PREFIX" ;; esac

owner=()
[ "$(id -u)" = 0 ] && owner=(-o 0 -g 0)

# Entries of the manifest, paths without DESTDIR: "f PATH" a file install wrote, "d PATH" a
# directory it created, "c SHA256 PATH" the operator config it created (with its digest then).
entries=()

# mkdirs DIR...: create each missing directory (and its missing parents), recording them.
mkdirs() {
	local d p missing
	for d in "$@"; do
		missing=()
		p=$d
		while [ "$p" != / ] && [ ! -d "$DESTDIR$p" ]; do
			missing=("$p" "${missing[@]}")
			p=$(dirname "$p")
		done
		for p in "${missing[@]}"; do
			install -d -m 0755 "${owner[@]}" "$DESTDIR$p"
			entries+=("d $p")
		done
	done
}

# put SRC DST MODE: install SRC as DST (under DESTDIR) via a temporary name and a rename, so
# a running containerd or shim never reads a half-written file.
put() {
	local src=$1 dst=$2 m=$3
	mkdirs "$(dirname "$dst")"
	install -m "$m" "${owner[@]}" "$src" "$DESTDIR$dst.gensee-new"
	mv -f "$DESTDIR$dst.gensee-new" "$DESTDIR$dst"
	entries+=("f $dst")
}

do_install() {
	local b
	for b in "${binaries[@]}"; do
		[ -x "$BIN/$b" ] || die "$BIN/$b missing: run make build first"
	done
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# An earlier install's record of created directories and of the config it wrote.
	local old=()
	if [ -f "$DESTDIR$manifest" ]; then
		mapfile -t old < <(grep -E '^(d|c) ' "$DESTDIR$manifest" || true)
	fi

	for b in "${binaries[@]}"; do
		put "$BIN/$b" "$PREFIX/bin/$b" 0755
	done

	# The kit names /usr/local/bin; point it at PREFIX/bin.
	sed "s|/usr/local/bin/gensee-oci-hook|$PREFIX/bin/gensee-oci-hook|g" "$CONTRIB/hooks/gensee.json" >"$tmp/gensee.json"
	local unit
	for unit in gensee-verify gensee-analyzer gensee-node; do
		sed "s|/usr/local/bin/gensee |$PREFIX/bin/gensee |g; s|/usr/local/bin/gensee-node |$PREFIX/bin/gensee-node |g" \
			"$CONTRIB/systemd/$unit.service" >"$tmp/$unit.service"
	done
	if [ "$PREFIX" = /usr/local ]; then
		cp "$CONTRIB/systemd/containerd.service.d/10-gensee.conf" "$tmp/10-gensee.conf"
	else
		sed "s|^Environment=PATH=/usr/local/bin:|Environment=PATH=$PREFIX/bin:/usr/local/bin:|" \
			"$CONTRIB/systemd/containerd.service.d/10-gensee.conf" >"$tmp/10-gensee.conf"
	fi
	put "$CONTRIB/containerd/gensee-runtime.toml" "$SYSCONFDIR/containerd/conf.d/gensee.toml" 0644
	put "$tmp/10-gensee.conf" "$SYSCONFDIR/systemd/system/containerd.service.d/10-gensee.conf" 0644
	for unit in gensee-verify gensee-analyzer gensee-node; do
		put "$tmp/$unit.service" "$SYSCONFDIR/systemd/system/$unit.service" 0644
	done
	put "$CONTRIB/systemd/gensee-verify.timer" "$SYSCONFDIR/systemd/system/gensee-verify.timer" 0644
	put "$tmp/gensee.json" "$HOOKSDIR/gensee.json" 0644

	# The operator config: never overwritten. Root-owned, not group/other-writable.
	local cfg=$SYSCONFDIR/gensee/config.toml line
	if [ -e "$DESTDIR$cfg" ] || [ -L "$DESTDIR$cfg" ]; then
		echo "install: $DESTDIR$cfg exists: kept"
	else
		mkdirs "$(dirname "$cfg")"
		install -m 0644 "${owner[@]}" "$CONTRIB/gensee/config.toml" "$DESTDIR$cfg"
		entries+=("c $(sha256sum <"$DESTDIR$cfg" | cut -d' ' -f1) $cfg")
	fi

	# Man pages from the command tree, completions from the installed CLI's own tree.
	local man=$MANPAGES
	if [ -z "$man" ]; then
		man=$tmp/man1
		(cd "$top" && go run ./hack/genman -out "$man" -version "$VERSION" >/dev/null)
	fi
	for b in "$man"/*.1; do
		put "$b" "$PREFIX/share/man/man1/$(basename "$b")" 0644
	done
	"$BIN/gensee" completion bash >"$tmp/gensee.bash"
	"$BIN/gensee" completion zsh >"$tmp/_gensee"
	"$BIN/gensee" completion fish >"$tmp/gensee.fish"
	put "$tmp/gensee.bash" "$PREFIX/share/bash-completion/completions/gensee" 0644
	put "$tmp/_gensee" "$PREFIX/share/zsh/site-functions/_gensee" 0644
	put "$tmp/gensee.fish" "$PREFIX/share/fish/vendor_completions.d/gensee.fish" 0644

	mkdirs "$(dirname "$manifest")"
	for line in "${old[@]}"; do
		printf '%s\n' "${entries[@]}" | grep -qxF "$line" || entries=("$line" "${entries[@]}")
	done
	printf '%s\n' "${entries[@]}" >"$DESTDIR$manifest.gensee-new"
	chmod 0644 "$DESTDIR$manifest.gensee-new"
	mv -f "$DESTDIR$manifest.gensee-new" "$DESTDIR$manifest"
	echo "install: gensee in $DESTDIR$PREFIX/bin; record: $DESTDIR$manifest"
	if [ -z "$DESTDIR" ]; then
		echo "install: next: systemctl daemon-reload && systemctl restart containerd (the drop-ins are new);"
		echo "install: the trust anchor and signed catalog that $cfg names are yours to put in place"
	fi
}

do_uninstall() {
	[ -f "$DESTDIR$manifest" ] || die "$DESTDIR$manifest missing: nothing installed with PREFIX=$PREFIX${DESTDIR:+ DESTDIR=$DESTDIR}"
	local kind a b dirs=()
	while read -r kind a b; do
		case $kind in
		f) rm -f "$DESTDIR$a" ;;
		c)
			if [ -f "$DESTDIR$b" ] && [ "$(sha256sum <"$DESTDIR$b" | cut -d' ' -f1)" = "$a" ]; then
				rm -f "$DESTDIR$b"
			elif [ -e "$DESTDIR$b" ]; then
				echo "uninstall: $DESTDIR$b changed since install: kept"
			fi
			;;
		d) dirs=("$a" "${dirs[@]}") ;;
		esac
	done <"$DESTDIR$manifest"
	rm -f "$DESTDIR$manifest"
	# Directories install created, deepest first, if nothing else is in them.
	local d
	for d in $(printf '%s\n' "${dirs[@]}" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
		rmdir "$DESTDIR$d" 2>/dev/null || true
	done
	echo "uninstall: removed what $DESTDIR$manifest listed"
}

case $mode in
install) do_install ;;
uninstall) do_uninstall ;;
*)
	echo "usage: hack/install.sh install|uninstall (DESTDIR, PREFIX, SYSCONFDIR, HOOKSDIR, BIN from the environment)" >&2
	exit 2
	;;
esac
