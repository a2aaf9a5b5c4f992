// Durations as people write them: "90s", "30m", "24h", "7d", "1h30m"
// (units d, h, m, s, ms), for retention's max age.

import type { Duration } from "@bufbuild/protobuf/wkt";

const UNITS: Record<string, number> = { d: 86400000, h: 3600000, m: 60000, s: 1000, ms: 1 };

/** parseDuration returns milliseconds, or an error naming what is wrong. */
export function parseDuration(text: string): { ok: true; ms: number } | { ok: false; error: string } {
  const t = text.trim().replace(/\s+/g, "");
  if (t === "" || t === "0") return { ok: true, ms: 0 };
  const re = /(\d+(?:\.\d+)?)(ms|d|h|m|s)/gy;
  let ms = 0;
  let at = 0;
  for (let m = re.exec(t); m; m = re.exec(t)) {
    ms += Number(m[1]) * UNITS[m[2]];
    at = re.lastIndex;
  }
  if (at !== t.length) return { ok: false, error: `"${text.trim()}" is not a duration: write a number and a unit (d, h, m, s or ms), e.g. 7d or 1h30m` };
  return { ok: true, ms: Math.round(ms) };
}

/** fmtDuration writes milliseconds in the largest whole units ("7d", "1h30m", "0"). */
export function fmtDuration(ms: number): string {
  if (ms <= 0) return "0";
  let out = "";
  for (const [u, n] of Object.entries(UNITS)) {
    if (ms >= n) {
      out += `${Math.floor(ms / n)}${u}`;
      ms %= n;
    }
  }
  return out;
}

export const toMs = (d: Duration | undefined) => (d ? Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6) : 0);
export const fromMs = (ms: number): Duration => ({ $typeName: "google.protobuf.Duration", seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });
