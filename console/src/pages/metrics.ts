// Metrics: the serving node's own /metrics, read every two seconds and
// drawn as rates: RPC throughput (Connect and EventoDB calls), RPC latency (mean and p99) and Raft
// (entries committed per second, apply lag, term and state).

import { session } from "../api";
import { lineChart } from "../chart";
import { buckets, isWrite, parseMetrics, quantile, sum, type Metrics } from "../prom";
import { h, replace } from "../ui";

const EVERY_MS = 2000;
const POINTS = 60;
const STATES = ["follower", "candidate", "leader", "shutdown"];

export function metricsPage(root: HTMLElement): () => void {
  const nodeSel = h("select", { id: "metrics-node" }, session.nodes.map((n) => h("option", { value: n, selected: n === session.base }, n.replace(/^https?:\/\//, ""))));
  const raft = h("div", { id: "metrics-raft", class: "summary" });
  const charts = h("div", { id: "metrics-charts", class: "charts" }, "Collecting…");
  const err = h("pre", { class: "error", hidden: true });
  let prev: { at: number; m: Metrics } | undefined;
  const series = { rps: [] as number[], writes: [] as number[], mean: [] as (number | undefined)[], p99: [] as (number | undefined)[], commits: [] as number[], lag: [] as number[] };
  const push = <T>(a: T[], v: T) => {
    a.push(v);
    if (a.length > POINTS) a.shift();
  };
  let stopped = false;

  nodeSel.addEventListener("change", () => {
    prev = undefined;
    for (const a of Object.values(series)) a.length = 0;
    void tick();
  });

  const tick = async () => {
    try {
      const resp = await fetch(`${nodeSel.value}/metrics`, { signal: AbortSignal.timeout(EVERY_MS) });
      if (!resp.ok) throw new Error(`GET /metrics: HTTP ${resp.status}`);
      const m = parseMetrics(await resp.text());
      const at = performance.now();
      err.hidden = true;
      const state = sum(m, "skald_raft_state");
      replace(
        raft,
        h("span", null, "State ", h("strong", { id: "metrics-state" }, STATES[state] ?? String(state))),
        h("span", null, "Term ", h("strong", null, sum(m, "skald_raft_term"))),
        h("span", null, "Commit index ", h("strong", null, sum(m, "skald_raft_commit_index"))),
        h("span", null, "Applied index ", h("strong", null, sum(m, "skald_raft_applied_index"))),
        h("span", null, "Last contact ", h("strong", null, `${(sum(m, "skald_raft_last_contact_seconds") * 1000).toFixed(0)} ms`)),
      );
      if (prev) {
        const dt = (at - prev.at) / 1000;
        const p = prev.m;
        const rate = (name: string, f?: (l: Record<string, string>) => boolean) => Math.max(0, (sum(m, name, f) - sum(p, name, f)) / dt);
        push(series.rps, rate("skald_rpc_requests_total"));
        push(series.writes, rate("skald_rpc_requests_total", (l) => isWrite(l.procedure)));
        const dCount = sum(m, "skald_rpc_duration_seconds_count") - sum(p, "skald_rpc_duration_seconds_count");
        const dSum = sum(m, "skald_rpc_duration_seconds_sum") - sum(p, "skald_rpc_duration_seconds_sum");
        push(series.mean, dCount > 0 ? (dSum / dCount) * 1000 : undefined);
        const q = quantile(0.99, buckets(p, "skald_rpc_duration_seconds"), buckets(m, "skald_rpc_duration_seconds"));
        push(series.p99, q === undefined ? undefined : q * 1000);
        push(series.commits, rate("skald_raft_commit_index"));
        push(series.lag, Math.max(0, sum(m, "skald_raft_commit_index") - sum(m, "skald_raft_applied_index")));
        const secs = (POINTS * EVERY_MS) / 1000;
        replace(
          charts,
          lineChart("RPC throughput", "calls/s", [{ name: "all", color: "#2a6fdb", points: series.rps }, { name: "writes", color: "#d9534f", points: series.writes }], POINTS, secs),
          lineChart("RPC latency", "ms", [{ name: "mean", color: "#2a6fdb", points: series.mean }, { name: "p99", color: "#d9534f", points: series.p99 }], POINTS, secs),
          lineChart("Raft", "entries/s, entries", [{ name: "committed/s", color: "#2a6fdb", points: series.commits }, { name: "apply lag", color: "#5cb85c", points: series.lag }], POINTS, secs),
        );
      }
      prev = { at, m };
    } catch (e) {
      err.textContent = `${nodeSel.value}: ${e instanceof Error ? e.message : String(e)}`;
      err.hidden = false;
    }
  };

  replace(root, h("h2", null, "Metrics"), h("label", null, "Node ", nodeSel), raft, err, charts, h("p", { class: "muted" }, "From the node's /metrics (Prometheus text), every 2 s; rates are differences between two reads."));
  void tick();
  const timer = window.setInterval(() => !stopped && tick(), EVERY_MS);
  return () => {
    stopped = true;
    window.clearInterval(timer);
  };
}
