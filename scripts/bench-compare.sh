#!/usr/bin/env bash
# make bench-compare: on this machine, in this run, one system after the
# other on 127.0.0.1 only, 3 nodes each, fsync before every acknowledgement:
#   etcd (Debian etcd-server, its defaults) driven with puts,
#   NATS JetStream (nats-server, pinned, go-installed) with synchronous
#     publishes to an R3 file stream with sync_interval: always,
#   Skald (skald dev) with single-message appends (Connect unary, EventoDB
#     stream.write, Connect AppendStream),
# at the same concurrency, value size and key/subject/stream count, with
# clients spread over all three nodes; prints the three and Skald's ratios
# (README: Performance). Server CPU per operation is read the same way for
# all three: utime+stime in /proc/<pid>/stat of the server processes this
# script started, just before and after each load run.
set -euo pipefail
cd "$(dirname "$0")/.."
CONC=${BENCH_CONCURRENCY:-64}
BYTES=${BENCH_BYTES:-200}
DUR=${BENCH_DURATION:-15s}
STREAMS=${BENCH_STREAMS:-1000}
PORT=${BENCH_PORT:-18080} # Skald's base port, as in bench-ab
GO=${GO:-go}
NATS_VERSION=v2.15.2
gopath=$($GO env GOPATH)
NATS_SERVER=${NATS_SERVER:-${gopath%%:*}/bin/nats-server}
CLK_TCK=$(getconf CLK_TCK)

for tool in curl pgrep; do
	command -v "$tool" >/dev/null || { echo "bench-compare: needs $tool" >&2; exit 1; }
done
if ! command -v etcd >/dev/null; then
	echo "--- installing etcd-server (Debian)"
	if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq etcd-server >/dev/null
	else sudo apt-get update -qq && sudo apt-get install -y -qq etcd-server >/dev/null; fi
fi
# Debian's package starts a system etcd on 2379/2380; ours use other ports.
if [ "$("$NATS_SERVER" --version 2>/dev/null)" != "nats-server: $NATS_VERSION" ]; then
	echo "--- installing nats-server $NATS_VERSION into $(dirname "$NATS_SERVER") (go install)"
	GOBIN=$(dirname "$NATS_SERVER") $GO install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
fi

tmp=$(mktemp -d)
pids=() # every server process started, for cleanup

# alive PID: the process exists and is not a zombie.
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# stop PID...: SIGTERM, at most 20 s to exit, then SIGKILL.
stop() {
	local p end=$((SECONDS + 20))
	for p in "$@"; do kill "$p" 2>/dev/null || true; done
	for p in "$@"; do
		while alive "$p" && ((SECONDS < end)); do sleep 0.1; done
		! alive "$p" || kill -9 "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true # reap our own children; others are not ours to wait for
	done
}
cleanup() {
	((${#pids[@]})) && stop "${pids[@]}"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# wait_until SECONDS WHAT LOG COMMAND...: polls COMMAND until it succeeds;
# after SECONDS fails the run with the end of LOG.
wait_until() {
	local secs=$1 what=$2 log=$3 end=$((SECONDS + $1))
	shift 3
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= end)); then
			echo "bench-compare: $what not ready after ${secs}s; end of $log:" >&2
			tail -20 "$log" >&2 || true
			exit 1
		fi
		sleep 0.2
	done
}
# ports_free PORT...: nothing listens on them, so our clients cannot reach
# someone else's server (another bench on this machine) by mistake.
ports_free() {
	local p
	for p in "$@"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "bench-compare: 127.0.0.1:$p is already in use (another bench running?)" >&2
			exit 1
		fi
	done
}
# measure PIDS -- DRIVER...: the driver's JSON plus the servers' /proc CPU.
measure() { local p=$1; shift; "$tmp/bench" measure --pids "$p" --clk-tck "$CLK_TCK" -- "$@"; }

$GO build -o "$tmp/skald" ./cmd/skald
(cd bench/etcd && $GO build -o "$tmp/bench" .)

echo "--- etcd $(etcd --version | head -1 | awk '{print $3}'): 3 members on 127.0.0.1:23791-23793, $CONC clients, $BYTES-byte values, $STREAMS keys, $DUR"
ports_free 23791 23792 23793 23801 23802 23803
cluster="e1=http://127.0.0.1:23801,e2=http://127.0.0.1:23802,e3=http://127.0.0.1:23803"
for i in 1 2 3; do
	etcd --name "e$i" --data-dir "$tmp/e$i" \
		--listen-client-urls "http://127.0.0.1:2379$i" --advertise-client-urls "http://127.0.0.1:2379$i" \
		--listen-peer-urls "http://127.0.0.1:2380$i" --initial-advertise-peer-urls "http://127.0.0.1:2380$i" \
		--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
		--log-level error > "$tmp/e$i.log" 2>&1 &
	pids+=($!)
done
side=("${pids[@]}")
for i in 1 2 3; do
	wait_until 60 "etcd e$i" "$tmp/e$i.log" curl -sf --max-time 2 "http://127.0.0.1:2379$i/health"
done
measure "$(IFS=,; echo "${side[*]}")" "$tmp/bench" put --endpoints 127.0.0.1:23791,127.0.0.1:23792,127.0.0.1:23793 \
	--concurrency "$CONC" --value-bytes "$BYTES" --keys "$STREAMS" --duration "$DUR" > "$tmp/etcd.json"
stop "${side[@]}"
pids=()

echo "--- NATS JetStream $NATS_VERSION: 3 servers on 127.0.0.1:4221-4223, R3 file stream, sync_interval always, $CONC clients, $BYTES-byte messages, $STREAMS subjects, $DUR"
ports_free 4221 4222 4223 6221 6222 6223 8221 8222 8223
for i in 1 2 3; do
	cat > "$tmp/n$i.conf" <<-EOF
		server_name: n$i
		listen: 127.0.0.1:422$i
		http: 127.0.0.1:822$i
		jetstream { store_dir: "$tmp/n$i", sync_interval: always }
		cluster {
		  name: bench
		  listen: 127.0.0.1:622$i
		  routes: [nats-route://127.0.0.1:6221, nats-route://127.0.0.1:6222, nats-route://127.0.0.1:6223]
		  no_advertise: true
		}
	EOF
	"$NATS_SERVER" -c "$tmp/n$i.conf" > "$tmp/n$i.log" 2>&1 &
	pids+=($!)
done
side=("${pids[@]}")
for i in 1 2 3; do
	# /healthz answers 200 once JetStream (and its meta group) is current.
	wait_until 60 "nats n$i" "$tmp/n$i.log" curl -sf --max-time 2 "http://127.0.0.1:822$i/healthz"
	curl -sf --max-time 2 "http://127.0.0.1:822$i/varz" | grep -q '"sync_always": *true' ||
		{ echo "bench-compare: nats n$i does not report sync_always" >&2; exit 1; }
done
measure "$(IFS=,; echo "${side[*]}")" "$tmp/bench" nats --servers nats://127.0.0.1:4221,nats://127.0.0.1:4222,nats://127.0.0.1:4223 \
	--concurrency "$CONC" --value-bytes "$BYTES" --subjects "$STREAMS" --duration "$DUR" > "$tmp/nats.json"
stop "${side[@]}"
pids=()

echo "--- skald: 3 nodes (skald dev, ports $PORT..$((PORT + 22))), $CONC clients, $BYTES-byte messages, $STREAMS streams, $DUR"
ports_free $(for i in 0 1 2; do for o in 0 1 2; do echo $((PORT + 10 * i + o)); done; done)
"$tmp/skald" dev --nodes 3 --dir "$tmp/dev" --base-port "$PORT" --kurrentdb-port 0 > "$tmp/dev.out" 2>&1 &
dev=$!
pids+=($dev)
wait_until 60 "skald dev" "$tmp/dev.out" grep -q "cluster ready" "$tmp/dev.out"
# skald dev is a supervisor; the servers are its 3 children (own process group).
mapfile -t side < <(pgrep -P "$dev")
[ "${#side[@]}" = 3 ] || { echo "bench-compare: want 3 skald server processes under skald dev, found ${#side[@]}" >&2; exit 1; }
pids+=("${side[@]}")
# The same single appends through both APIs: Connect (unary calls), EventoDB's
# POST /rpc stream.write (what EventoDB's SDKs send), and the Go client's
# default over HTTP/2, concurrent appends sharing a few AppendStreams per node.
for wl in append evdb-append append-stream; do
	SKALD_TOKEN=$(sed -n 's/^Admin token: //p' "$tmp/dev.out") measure "$(IFS=,; echo "${side[*]}")" "$tmp/skald" bench --workload "$wl" \
		--concurrency "$CONC" --payload-bytes "$BYTES" --streams "$STREAMS" --duration "$DUR" --target all -o json \
		--addr "127.0.0.1:$PORT,127.0.0.1:$((PORT + 10)),127.0.0.1:$((PORT + 20))" > "$tmp/skald-$wl.json"
done
stop "${pids[@]}"
pids=()

echo
"$tmp/bench" compare "$tmp/etcd.json" "$tmp/nats.json" "$tmp/skald-append.json" "$tmp/skald-evdb-append.json" "$tmp/skald-append-stream.json"
