import { test } from "node:test";
import assert from "node:assert/strict";
import { fmtDuration, parseDuration } from "./duration";

test("parseDuration reads units and sums", () => {
  const cases: [string, number][] = [["0", 0], ["", 0], ["90s", 90000], ["30m", 1800000], ["7d", 604800000], ["1h30m", 5400000], ["250ms", 250], [" 2h ", 7200000]];
  for (const [text, want] of cases) assert.deepEqual(parseDuration(text), { ok: true, ms: want }, text);
});

test("parseDuration refuses what it cannot read", () => {
  for (const text of ["7", "7x", "h", "1h-2m", "-5m"]) {
    const r = parseDuration(text);
    assert.equal(r.ok, false, text);
    if (!r.ok) assert.match(r.error, /is not a duration/);
  }
});

test("fmtDuration writes the largest units", () => {
  assert.equal(fmtDuration(604800000), "7d");
  assert.equal(fmtDuration(5400000), "1h30m");
  assert.equal(fmtDuration(0), "0");
  assert.equal(fmtDuration(1500), "1s500ms");
});
