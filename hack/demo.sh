#!/usr/bin/env bash
# The demo: a private containerd with the gensee runtime, a demo key and
# signed catalog, one admitted container that writes a result and tries a
# denied connection, one refused container. Prints what happened and where
# the records are, then stops everything it started.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "demo: run as root (make demo)" >&2; exit 1; }

demo=/var/lib/gensee-demo
rm -rf "$demo"
install -d -m 0700 "$demo" "$demo/etc" "$demo/keys"
trap 'gensee_analyzer_stop; gensee_daemon_stop "$demo" demo demo-strict demo-analyzer' EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "trust: a demo catalog key, its public half installed as the trust anchor (root, 0400)"
gensee_trust "$demo"
gensee catalog inspect --catalog "$demo/etc/catalog.signed.json" --trusted-key "$demo/etc/catalog-root-public-key.hex"

say "a private containerd ($demo), the gensee runtime first on its PATH"
gensee_daemon_start "$demo"
gensee_image "$demo"
for ns in demo demo-strict demo-analyzer; do gensee_ctr "$ns" images import "$demo/image.tar" >/dev/null; done

run=(run --rm --runtime io.containerd.gensee.v2 --runtime-config-path "$demo/etc/config.toml")
say "admitted: writes out/result.json, then tries 127.0.0.1:9 (denied by deny_all)"
set +e
gensee_ctr demo "${run[@]}" --net-host docker.io/gensee/test:latest admitted \
	/bin/sh -c 'mkdir -p /workspace/out && echo "{\"ok\": true}" > /workspace/out/result.json && /bin/probe connect tcp 127.0.0.1:9'
echo "exit status: $?"
say "refused: no inference and no safe_default for namespace demo-strict"
gensee_ctr demo-strict "${run[@]}" docker.io/gensee/test:latest refused /bin/echo never-runs
echo "exit status: $?"
set -e

say "classified by the node analyzer: no inference attached; gensee analyzer serve (operator-signed rules) names the class"
gensee_analyzer "$demo"
gensee_ctr demo-analyzer "${run[@]}" docker.io/gensee/test:latest classified /bin/sh -c 'echo classified by the node analyzer'
echo "exit status: $?"
jq '{contract_id, safe_default, inference: (.inference | {analyzer, model, class, confidence_bp}), analyzer, observation_volatile_env: .observation.volatile_env}' \
	"$demo/state/operations/$(cat "$demo/state/index/demo-analyzer/classified")/admission.json"
gensee_analyzer_stop

op=$(cat "$demo/state/index/demo/admitted")
say "records of the admitted container: $demo/state/operations/$op/"
ls -l "$demo/state/operations/$op/"
say "gensee manifest show: the effect manifest of the admitted container"
GENSEE_CONFIG=$demo/etc/config.toml gensee manifest show --container admitted --namespace demo || true
say "gensee manifest verify: the staged products still match the manifest"
GENSEE_CONFIG=$demo/etc/config.toml gensee manifest verify --container admitted --namespace demo || true
say "gensee events: what the boundary refused, one row per event"
GENSEE_CONFIG=$demo/etc/config.toml gensee events --container admitted --namespace demo || true
say "gensee boundary audit: hit a wall, or defeated a control?"
GENSEE_CONFIG=$demo/etc/config.toml gensee boundary audit --container admitted --namespace demo || true
say "host command: gensee boundary run, the same boundary around a plain command (no container)"
# The README's "host commands" command, verbatim but for the workspace and
# --user: the demo runs as root itself, and uid 0 never runs a host
# command, so root names the account (under sudo it is the caller's).
ws=$demo/workspace
# The workspace is opened as that account: it must be able to reach it.
chmod 0711 "$demo"
install -d -m 0777 "$ws"
# Root reads the observation and the inference; nobody else writes there
# (/run/gensee itself is the node analyzer's socket directory).
install -d -m 0755 /run/gensee-demo
hostcmd=(sh -c 'mkdir -p out && printf "{\"ok\":true}\n" > out/result.json')
gensee observe --user nobody --workspace "$ws" -- "${hostcmd[@]}" >/run/gensee-demo/observation.json
gensee inference make --observation /run/gensee-demo/observation.json --class build --confidence 9300 \
	--key "$demo/keys/catalog-root-private-key.hex" --out /run/gensee-demo/inference.signed.json
set +e
GENSEE_CONFIG=$demo/etc/config.toml gensee boundary run --user nobody \
	--catalog "$demo/etc/catalog.signed.json" \
	--observation /run/gensee-demo/observation.json \
	--inference /run/gensee-demo/inference.signed.json \
	--workspace "$ws" \
	--manifest /tmp/gensee-effect-manifest.json \
	-- "${hostcmd[@]}"
echo "exit status: $? (the real workspace is unchanged: $(ls -A "$ws" | wc -l) entries)"
set -e
hostop=$(sed -n 's/^  "operation_id": "\([0-9a-f]*\)",$/\1/p' /tmp/gensee-effect-manifest.json)
GENSEE_CONFIG=$demo/etc/config.toml gensee manifest show --operation "$hostop" || true
say "refusals log: $demo/state/refusals.jsonl"
cat "$demo/state/refusals.jsonl"
say "done: the daemon is stopped; records stay under $demo/state"
