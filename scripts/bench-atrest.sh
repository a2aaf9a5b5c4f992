#!/usr/bin/env bash
# make bench-atrest: the server CPU per operation with encryption at rest off
# and on, one build, the same run.
#
# For ROUNDS rounds starts a fresh local 3-node cluster (skald dev) without
# and with SKALD_ENCRYPTION_KEY_FILE (the order alternates between rounds),
# drives it with skald bench ARGS and prints each run's throughput and the
# CPU the three servers spent per operation, then the medians. bench-ab
# compares two builds; encryption is a flag of one build, hence this script.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
ARGS=${ARGS:---workload append --concurrency 64 --duration 8s}
GO=${GO:-go}
PORT=${BENCH_PORT:-18080}
tmp=$(mktemp -d)
dev=
stop_cluster() {
	if [ -n "$dev" ]; then
		kill -TERM "$dev" 2>/dev/null || true
		wait "$dev" 2>/dev/null || true
		dev=
	fi
}
trap 'stop_cluster; rm -rf "$tmp"' EXIT
$GO build -o "$tmp/skald" ./cmd/skald
(umask 077 && openssl rand -hex 32 > "$tmp/store.key")

run() { # plain|atrest
	rm -rf "$tmp/dev"
	key=
	[ "$1" = atrest ] && key="$tmp/store.key"
	SKALD_ENCRYPTION_KEY_FILE=$key "$tmp/skald" dev --nodes 3 --dir "$tmp/dev" --base-port "$PORT" > "$tmp/dev.out" 2>&1 &
	dev=$!
	for _ in $(seq 300); do grep -q "cluster ready" "$tmp/dev.out" && break; sleep 0.2; done
	grep -q "cluster ready" "$tmp/dev.out" || { cat "$tmp/dev.out"; exit 1; }
	# shellcheck disable=SC2086 # ARGS is a list of flags
	out=$(SKALD_TOKEN=$(sed -n 's/^Admin token: //p' "$tmp/dev.out") "$tmp/skald" bench -o json \
		--addr "127.0.0.1:$PORT,127.0.0.1:$((PORT + 10)),127.0.0.1:$((PORT + 20))" $ARGS 2>/dev/null)
	if [ "$1" = atrest ] && ! find "$tmp/dev" -name ENCRYPTION-KEYS | grep -q .; then
		echo "the atrest run wrote no keys file: encryption was not on" >&2
		exit 1
	fi
	stop_cluster
	srvcpu=$(echo "$out" | sed -n 's/.*"server_cpu_us_per_op":\([0-9.e+]*\).*/\1/p')
	echo "$out" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*"messages_per_sec":\([0-9.]*\).*/\1 \2/p' |
		awk -v side="$1" -v cpu="${srvcpu:-0}" '{printf "%-6s %8.0f ops/s  %9.0f msgs/s  cpu %7.0f µs/op\n", side, $1, $2, cpu}' |
		tee -a "$tmp/runs"
}

echo "--- $ROUNDS rounds of: skald bench $ARGS"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then run plain; run atrest; else run atrest; run plain; fi
done
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "--- medians"
for side in plain atrest; do
	printf "%-6s %8.0f ops/s  cpu %7.0f µs/op\n" "$side" \
		"$(awk -v s="$side" '$1==s {print $2}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $7}' "$tmp/runs" | median)"
done
