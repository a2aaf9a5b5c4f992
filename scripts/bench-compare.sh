#!/usr/bin/env bash
# make bench-compare: on this machine, in this run, a 3-node etcd cluster
# (Debian etcd-server, fsync on, its defaults) driven with puts, then a
# 3-node Skald cluster driven with single-message appends, at the same
# concurrency and value size; prints both and the ratio (README: Performance).
set -euo pipefail
cd "$(dirname "$0")/.."
CONC=${BENCH_CONCURRENCY:-64}
BYTES=${BENCH_BYTES:-200}
DUR=${BENCH_DURATION:-15s}
GO=${GO:-go}

if ! command -v etcd >/dev/null; then
	echo "--- installing etcd-server (Debian)"
	if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq etcd-server >/dev/null
	else sudo apt-get update -qq && sudo apt-get install -y -qq etcd-server >/dev/null; fi
fi
# Debian's package starts a system etcd on 2379/2380; ours use other ports.
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

$GO build -o "$tmp/skald" ./cmd/skald
(cd bench/etcd && $GO build -o "$tmp/etcdbench" .)

echo "--- etcd $(etcd --version | head -1 | awk '{print $3}'): 3 members on 127.0.0.1:23791-23793, $CONC clients, $BYTES-byte values, $DUR"
cluster="e1=http://127.0.0.1:23801,e2=http://127.0.0.1:23802,e3=http://127.0.0.1:23803"
for i in 1 2 3; do
	etcd --name "e$i" --data-dir "$tmp/e$i" \
		--listen-client-urls "http://127.0.0.1:2379$i" --advertise-client-urls "http://127.0.0.1:2379$i" \
		--listen-peer-urls "http://127.0.0.1:2380$i" --initial-advertise-peer-urls "http://127.0.0.1:2380$i" \
		--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
		--log-level error > "$tmp/e$i.log" 2>&1 &
	pids+=($!)
done
"$tmp/etcdbench" put --endpoints 127.0.0.1:23791,127.0.0.1:23792,127.0.0.1:23793 \
	--concurrency "$CONC" --value-bytes "$BYTES" --duration "$DUR" > "$tmp/etcd.json"
for p in "${pids[@]}"; do kill "$p"; done
wait 2>/dev/null || true
pids=()

echo "--- skald: 3 nodes (skald dev, ports 18080..18102), $CONC clients, $BYTES-byte messages, $DUR"
"$tmp/skald" dev --nodes 3 --dir "$tmp/dev" --base-port 18080 > "$tmp/dev.out" 2>&1 &
pids+=($!)
for _ in $(seq 300); do grep -q "cluster ready" "$tmp/dev.out" && break; sleep 0.2; done
SKALD_TOKEN=$(sed -n 's/^Admin token: //p' "$tmp/dev.out") "$tmp/skald" bench --workload append \
	--concurrency "$CONC" --payload-bytes "$BYTES" --duration "$DUR" --target all -o json \
	--addr 127.0.0.1:18080,127.0.0.1:18090,127.0.0.1:18100 > "$tmp/skald.json"

echo
"$tmp/etcdbench" compare "$tmp/etcd.json" "$tmp/skald.json"
