# Sourced by hack/conformance.sh: what the run changes on the host, recorded before it
# starts (conformance_snapshot) and undone at exit, pass, fail or Ctrl-C
# (conformance_cleanup). Uses the run's variables dir, out, sock, bridge, net, bin and the
# pids critest_pid, registry_pid, containerd_pid once set. Removes only what it can tie to
# this run: its own directory, processes that name it, the bridge it named, iptables chains
# and gensee tables that appeared during the run, cgroups under k8s.io that were not there
# before; restores the forwarding sysctls the bridge plugin turns on.

# conformance_snapshot records the host state the run may change.
conformance_snapshot() {
	snap_forward4=$(cat /proc/sys/net/ipv4/ip_forward)
	snap_forward6=$(cat /proc/sys/net/ipv6/conf/all/forwarding 2>/dev/null || echo 0)
	local t
	for t in iptables ip6tables; do
		$t -t nat -S 2>/dev/null | awk '$1 == "-N" {print $2}' >"$dir/snap.$t.chains" || true
	done
	snap_nat_table=0
	nft list table ip nat >/dev/null 2>&1 && snap_nat_table=1
	snap_nat6_table=0
	nft list table ip6 nat >/dev/null 2>&1 && snap_nat6_table=1
	cgroup_dirs >"$dir/snap.cgroups"
}

# cgroup_dirs lists the cgroups under k8s.io (CRI's containerd namespace, where runc puts
# pods when critest gives no cgroup parent) in every hierarchy.
cgroup_dirs() {
	local mnt
	for mnt in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do
		if [ -d "$mnt/k8s.io" ]; then find "$mnt/k8s.io" -type d; fi
	done | sort
}

conformance_cleanup() {
	local rc=$? pid t c root
	set +e
	trap - EXIT INT TERM
	say "cleaning up"
	[ -z "${critest_pid:-}" ] || { kill -9 "$critest_pid"; wait "$critest_pid"; } 2>/dev/null
	touch "$dir/snap.iptables.chains" "$dir/snap.ip6tables.chains" "$dir/snap.cgroups"
	if [ -n "${containerd_pid:-}" ] && kill -0 "$containerd_pid" 2>/dev/null; then
		timeout 180 "$bin/crictl" --config "$dir/crictl.yaml" rmp -fa >/dev/null 2>&1
		kill "$containerd_pid"
		for _ in $(seq 1 75); do kill -0 "$containerd_pid" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$containerd_pid" 2>/dev/null
	fi
	# Shims outlive their daemon; every one of this run names its socket.
	for pid in $(ps -eo pid=,args= | awk -v a="-address $sock " 'index($0 " ", a) {print $1}'); do
		kill -9 "$pid" 2>/dev/null
	done
	# Containers left in this run's runc roots (runc keeps one per containerd namespace).
	for root in "$dir"/runc-runc "$dir"/runc-runc/* "$dir"/runc-gensee "$dir"/runc-gensee/*; do
		[ -d "$root" ] || continue
		for c in $("$bin/runc" --root "$root" list -q 2>/dev/null); do
			"$bin/runc" --root "$root" kill "$c" KILL >/dev/null 2>&1
			"$bin/runc" --root "$root" delete -f "$c" >/dev/null 2>&1
		done
	done
	[ -n "${registry_pid:-}" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null

	# Mounts under the run's directory (rootfs, shm, netns), deepest first.
	{ grep -o " $dir/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m"; done

	# The bridge, host ends of veths still on it, portmap's chains, CNI's result cache.
	if ip link show "$bridge" >/dev/null 2>&1; then
		for c in $(ip -o link show master "$bridge" | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$c"; done
		ip link del "$bridge"
	fi
	for t in iptables ip6tables; do
		local new
		new=$($t -t nat -S 2>/dev/null | awk '$1 == "-N" {print $2}' | grep -vxF -f "$dir/snap.$t.chains" || true)
		[ -n "$new" ] || continue
		for c in $new; do $t -t nat -F "$c"; done
		for c in $new; do
			$t -t nat -S | awk -v c="$c" '$1 == "-A" && / -j / && $NF == c' | sed 's/^-A/-D/' |
				while read -r rule; do eval "$t -t nat $rule"; done
		done
		for c in $new; do $t -t nat -X "$c"; done
	done
	if [ "${snap_nat_table:-1}" = 0 ] && nft list table ip nat >/dev/null 2>&1 && ! iptables -t nat -S | grep -q '^-A'; then
		nft delete table ip nat
	fi
	if [ "${snap_nat6_table:-1}" = 0 ] && nft list table ip6 nat >/dev/null 2>&1 && ! ip6tables -t nat -S | grep -q '^-A'; then
		nft delete table ip6 nat
	fi
	[ -z "${snap_forward4:-}" ] || echo "$snap_forward4" >/proc/sys/net/ipv4/ip_forward
	[ -z "${snap_forward6:-}" ] || echo "$snap_forward6" >/proc/sys/net/ipv6/conf/all/forwarding
	rm -f /var/lib/cni/results/"$net"-*

	# gensee tables a hostNetwork pod left in the host netns: only those this run's records name.
	for t in $(nft -j list tables 2>/dev/null | grep -o '"name": *"gensee_[^"]*"' | cut -d'"' -f4); do
		grep -rqs "\"$t\"" "$dir/gensee-state" && nft delete table inet "$t" && say "removed leftover table $t"
	done

	# cgroups runc made under k8s.io during the run, deepest first (rmdir only removes empty ones).
	cgroup_dirs | grep -vxF -f "$dir/snap.cgroups" | sort -r | while read -r c; do rmdir "$c" 2>/dev/null; done
	local cgroups_left
	cgroups_left=$(cgroup_dirs | grep -vxF -f "$dir/snap.cgroups" | tr '\n' ' ')

	cp "$dir/containerd.log" "$dir/registry.log" "$out/" 2>/dev/null
	rm -rf "$dir"
	conformance_check_left "$cgroups_left"
	exit "$rc"
}

# conformance_check_left CGROUPS says what could not be removed.
conformance_check_left() {
	local left=()
	[ -z "$1" ] || left+=("cgroups $1")
	ps -eo args= | grep -F -- "$dir" | grep -vq grep && left+=("processes naming $dir")
	grep -qF " $dir" /proc/self/mounts && left+=("mounts under $dir")
	[ -e "$dir" ] && left+=("$dir")
	ip link show "$bridge" >/dev/null 2>&1 && left+=("bridge $bridge")
	if [ ${#left[@]} -gt 0 ]; then
		say "LEFT BEHIND: ${left[*]}"
	fi
}
