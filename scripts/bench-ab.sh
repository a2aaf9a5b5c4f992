#!/usr/bin/env bash
# make bench-ab A=<rev> B=<rev>: is B faster than A on this machine?
#
# Builds both revisions, then for ROUNDS rounds starts a fresh local 3-node
# cluster of each in turn (the order alternates between rounds) and drives
# it with the same skald bench client (B's) and ARGS. Prints every run, the
# CPU the three servers spent per operation, the CPU steal the host took
# during it, and the medians. On a shared VM a single run says little:
# throughput swings by a third within the hour, and only pairs run back to
# back are comparable; CPU per operation moves far less.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:?set A to a git revision (the baseline)}
B=${B:-HEAD}
ROUNDS=${ROUNDS:-3}
ARGS=${ARGS:---workload append --concurrency 64 --duration 8s}
GO=${GO:-go}
PORT=${BENCH_PORT:-18080}

tmp=$(mktemp -d)
dev=
cleanup() {
	stop_cluster
	for side in a b; do git worktree remove --force "$tmp/src-$side" 2>/dev/null || true; done
	rm -rf "$tmp"
}
stop_cluster() {
	if [ -n "$dev" ]; then
		kill -TERM "$dev" 2>/dev/null || true
		wait "$dev" 2>/dev/null || true
		dev=
	fi
}
trap cleanup EXIT

build() { # side revision
	git worktree add -q --detach "$tmp/src-$1" "$2"
	(cd "$tmp/src-$1" && $GO build -o "$tmp/skald-$1" ./cmd/skald)
	echo "--- $1 = $2 ($(git rev-parse --short "$2"))"
}
build a "$A"
build b "$B"

cpu() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $9}' /proc/stat; }

latency() { # key latency_ms-object-body: that percentile in ms, 0 if absent
	echo "$2" | tr ',' '\n' | sed -n "s/^\"$1\":\([0-9.e+-]*\)$/\1/p" | grep . || echo 0
}

run() { # side
	rm -rf "$tmp/dev"
	"$tmp/skald-$1" dev --nodes 3 --dir "$tmp/dev" --base-port "$PORT" > "$tmp/dev.out" 2>&1 &
	dev=$!
	for _ in $(seq 300); do grep -q "cluster ready" "$tmp/dev.out" && break; sleep 0.2; done
	grep -q "cluster ready" "$tmp/dev.out" || { cat "$tmp/dev.out"; exit 1; }
	read -r t0 s0 < <(cpu)
	# shellcheck disable=SC2086 # ARGS is a list of flags
	out=$(SKALD_TOKEN=$(sed -n 's/^Admin token: //p' "$tmp/dev.out") "$tmp/skald-b" bench -o json \
		--addr "127.0.0.1:$PORT,127.0.0.1:$((PORT + 10)),127.0.0.1:$((PORT + 20))" $ARGS 2>/dev/null)
	read -r t1 s1 < <(cpu)
	stop_cluster
	steal=$(( 100 * (s1 - s0) / (t1 - t0 + 1) ))
	srvcpu=$(echo "$out" | sed -n 's/.*"server_cpu_us_per_op":\([0-9.e+]*\).*/\1/p')
	# The latencies are read from latency_ms alone (index_lag_ms has keys of the same names).
	lat=$(echo "$out" | sed -n 's/.*"latency_ms":{\([^}]*\)}.*/\1/p')
	echo "$out" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*"messages_per_sec":\([0-9.]*\).*/\1 \2/p' |
		awk -v side="$1" -v steal="$steal" -v cpu="${srvcpu:-0}" -v p50="$(latency p50 "$lat")" -v p99="$(latency p99 "$lat")" \
			-v p999="$(latency p999 "$lat")" -v max="$(latency max "$lat")" \
			'{printf "%s  %8.0f ops/s  %9.0f msgs/s  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms  cpu %7.0f µs/op  steal %d%%\n", side, $1, $2, p50, p99, p999, max, cpu, steal}' |
		tee -a "$tmp/runs"
}

echo "--- $ROUNDS rounds of: skald bench $ARGS"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then run a; run b; else run b; run a; fi
done

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "--- medians"
for side in a b; do
	printf "%s  %8.0f ops/s  %9.0f msgs/s  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms  cpu %7.0f µs/op\n" "$side" \
		"$(awk -v s="$side" '$1==s {print $2}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $4}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $7}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $10}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $13}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $16}' "$tmp/runs" | median)" \
		"$(awk -v s="$side" '$1==s {print $19}' "$tmp/runs" | median)"
done
