#!/usr/bin/env bash
# make bench-profile: where one skald bench workload's server CPU goes, per
# node role. Starts a local 3-node cluster (skald dev), runs
# `skald bench $ARGS` for DURATION, takes an 8 s CPU profile of every node
# in the middle of the run, and prints the breakdown of bench/README.md:
# µs of server CPU per operation on the leader, on an average follower and
# over all nodes, by what the write path spends them on. The profiles and
# the bench JSON stay in OUT (default: a temp dir, removed) for pprof.
set -euo pipefail
cd "$(dirname "$0")/.."
ARGS=${ARGS:---workload append --concurrency 64}
DURATION=${DURATION:-16s}
GO=${GO:-go}
PORT=${BENCH_PORT:-18080}

tmp=$(mktemp -d)
out=${OUT:-$tmp/out}
mkdir -p "$out"
dev=
cleanup() {
	if [ -n "$dev" ]; then kill -TERM "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

$GO build -o "$tmp/skald" ./cmd/skald
(cd bench/etcd && $GO build -o "$tmp/bench" .)
"$tmp/skald" dev --nodes 3 --dir "$tmp/dev" --base-port "$PORT" --kurrentdb-port 0 > "$tmp/dev.out" 2>&1 &
dev=$!
for _ in $(seq 300); do grep -q "cluster ready" "$tmp/dev.out" && break; sleep 0.2; done
grep -q "cluster ready" "$tmp/dev.out" || { cat "$tmp/dev.out"; exit 1; }
export SKALD_TOKEN
SKALD_TOKEN=$(sed -n 's/^Admin token: //p' "$tmp/dev.out")
addrs="127.0.0.1:$PORT,127.0.0.1:$((PORT + 10)),127.0.0.1:$((PORT + 20))"

# shellcheck disable=SC2086 # ARGS is a list of flags
"$tmp/skald" bench -o json --addr "$addrs" --duration "$DURATION" $ARGS > "$out/bench.json" 2> "$tmp/bench.err" &
bench=$!
secs=${DURATION%s}
sleep $(((secs - 8) / 2))
profs=()
for i in 0 1 2; do
	curl -sf -H "Authorization: Bearer $SKALD_TOKEN" \
		"http://127.0.0.1:$((PORT + 10 * i))/debug/pprof/profile?seconds=8" > "$out/cpu-node$i.pprof" &
	profs+=($!)
done
wait "${profs[@]}"
wait "$bench" || { cat "$tmp/bench.err"; exit 1; }

# The leader at the end of the run (a leader change during it would mix roles: check the log).
status=$("$tmp/skald" cluster status --addr "127.0.0.1:$PORT" -o json)
# protojson puts a space after some commas and not after others: match both.
leader=$(echo "$status" | grep -o '"leaderId": *"[^"]*"' | cut -d'"' -f4)
raft=$(echo "$status" | grep -o "\"id\": *\"$leader\", *\"name\": *\"[^\"]*\", *\"raftAddress\": *\"[^\"]*\"" | sed 's/.*"raftAddress": *"//; s/"$//')
lnode=$(((${raft##*:} - PORT - 1) / 10))
followers=()
for i in 0 1 2; do [ "$i" = "$lnode" ] || followers+=("$out/cpu-node$i.pprof"); done
perop=$(sed -n 's/.*"server_cpu_us_per_op":\([0-9.e+]*\).*/\1/p' "$out/bench.json")
ops=$(sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p' "$out/bench.json")
echo "--- skald bench $ARGS, $DURATION: ${ops%.*} ops/s, ${perop%.*} µs of server CPU per op; leader node$lnode"
"$tmp/bench" breakdown --per-op "$perop" --leader "$out/cpu-node$lnode.pprof" "${followers[@]}"
