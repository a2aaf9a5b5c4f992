// Unit tests of the /metrics reader, run by build.sh with node's test runner.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buckets, isWrite, parseMetrics, quantile, sum } from "./prom";

const text = `# HELP skald_rpc_requests_total RPCs handled, by procedure and code.
# TYPE skald_rpc_requests_total counter
skald_rpc_requests_total{code="ok",procedure="/skald.v1.EventStore/Append"} 10
skald_rpc_requests_total{code="aborted",procedure="/skald.v1.EventStore/Append"} 2
skald_rpc_requests_total{code="ok",procedure="/skald.v1.Cluster/Status"} 5
skald_raft_state 2
skald_rpc_duration_seconds_bucket{code="ok",procedure="a",le="0.001"} 1
skald_rpc_duration_seconds_bucket{code="ok",procedure="a",le="0.002"} 3
skald_rpc_duration_seconds_bucket{code="ok",procedure="a",le="+Inf"} 4
skald_rpc_duration_seconds_bucket{code="ok",procedure="b",le="0.001"} 0
skald_rpc_duration_seconds_bucket{code="ok",procedure="b",le="0.002"} 0
skald_rpc_duration_seconds_bucket{code="ok",procedure="b",le="+Inf"} 0
odd_label{v="a \\"quoted\\" value, with } inside"} 1.5e3
`;

test("parse and sum", () => {
  const m = parseMetrics(text);
  assert.equal(sum(m, "skald_rpc_requests_total"), 17);
  assert.equal(sum(m, "skald_rpc_requests_total", (l) => l.procedure.endsWith("/Append")), 12);
  assert.equal(sum(m, "skald_raft_state"), 2);
  assert.equal(sum(m, "missing"), 0);
  assert.deepEqual(m.get("odd_label"), [{ labels: { v: 'a "quoted" value, with } inside' }, value: 1500 }]);
});

test("buckets add up across label sets", () => {
  const b = buckets(parseMetrics(text), "skald_rpc_duration_seconds");
  assert.deepEqual([...b.entries()], [[0.001, 1], [0.002, 3], [Infinity, 4]]);
});

test("quantile interpolates within the bucket of the rank", () => {
  const before = new Map([[0.001, 0], [0.002, 0], [Infinity, 0]]);
  const after = new Map([[0.001, 50], [0.002, 100], [Infinity, 100]]);
  assert.equal(quantile(0.5, before, after), 0.001);
  assert.equal(quantile(0.75, before, after), 0.0015);
  assert.equal(quantile(0.99, new Map(), new Map()), undefined);
  // Above the last finite bound: that bound.
  assert.equal(quantile(0.99, before, new Map([[0.001, 0], [0.002, 0], [Infinity, 10]])), 0.002);
  // Nothing new between the two reads: no estimate.
  assert.equal(quantile(0.99, after, after), undefined);
});

test("writes on both APIs count as writes, reads do not", () => {
  const cases: [string, boolean][] = [
    ["/skald.v1.EventStore/Append", true],
    ["/skald.v1.EventStore/AppendMulti", true],
    ["/skald.v1.EventStore/AppendStream", true], // each request of the stream
    ["/skald.v1.EventStore/DeleteStream", true],
    ["/skald.v1.Namespaces/Create", true],
    ["/skald.v1.EventStore/ReadStream", false],
    ["/skald.v1.Cluster/Status", false],
    ["eventodb/stream.write", true],
    ["eventodb/ns.create", true],
    ["eventodb/import", true],
    ["eventodb/stream.get", false],
    ["eventodb/rpc", false],
  ];
  for (const [procedure, want] of cases) assert.equal(isWrite(procedure), want, procedure);
  assert.equal(isWrite(undefined), false);
});
