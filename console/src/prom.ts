// A reader of the Prometheus text format, enough for the node's own
// /metrics: samples by name, each with its labels.

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export type Metrics = Map<string, Sample[]>;

export function parseMetrics(text: string): Metrics {
  const out: Metrics = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    }
    const list = out.get(m[1]) ?? [];
    list.push({ labels, value: Number(m[4]) });
    out.set(m[1], list);
  }
  return out;
}

/**
 * isWrite tells the procedures of skald_rpc_requests_total that write or
 * remove messages or namespaces, on both APIs: Connect's by path, EventoDB's
 * as "eventodb/<method>" ("eventodb/import" for /import).
 */
export function isWrite(procedure: string | undefined): boolean {
  return /^\/skald\.v1\.(EventStore\/(Append|AppendMulti|AppendStream|DeleteStream|TruncateStream|DeleteByWatermark)|Namespaces\/(Create|Delete))$|^eventodb\/(stream\.(write|delete|truncate)|category\.deleteByWatermark|ns\.(create|delete)|import)$/.test(
    procedure ?? "",
  );
}

/** sum adds the samples of name whose labels pass the filter. */
export function sum(ms: Metrics, name: string, filter: (l: Record<string, string>) => boolean = () => true): number {
  return (ms.get(name) ?? []).filter((s) => filter(s.labels)).reduce((a, s) => a + s.value, 0);
}

/** buckets adds a histogram's cumulative buckets across label sets, by le. */
export function buckets(ms: Metrics, name: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of ms.get(`${name}_bucket`) ?? []) {
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/** quantile estimates q from the increase of cumulative buckets between two scrapes. */
export function quantile(q: number, before: Map<number, number>, after: Map<number, number>): number | undefined {
  const les = [...after.keys()].sort((a, b) => a - b);
  const inc = les.map((le) => (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = inc[inc.length - 1];
  if (!total || total <= 0) return undefined;
  const rank = q * total;
  for (let i = 0; i < les.length; i++) {
    if (inc[i] >= rank) {
      const lo = i ? les[i - 1] : 0;
      const hi = les[i] === Infinity ? lo : les[i];
      const below = i ? inc[i - 1] : 0;
      const within = inc[i] - below;
      return within > 0 ? lo + ((hi - lo) * (rank - below)) / within : hi;
    }
  }
  return undefined;
}
