// A small SVG line chart: up to a few series over the same time axis,
// scaled to the largest value shown.

import { h, svg } from "./ui";

export interface Series {
  name: string;
  color: string;
  points: (number | undefined)[];
}

const W = 460;
const H = 150;
const PAD = { l: 48, r: 8, t: 8, b: 18 };

/** niceMax rounds the top of the scale up to 1, 2 or 5 times a power of ten. */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return ([1, 2, 5, 10].find((m) => m * p >= v) ?? 10) * p;
}

function fmt(v: number): string {
  if (v === 0) return "0";
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e4) return `${(v / 1e3).toFixed(0)}k`;
  if (Math.abs(v) >= 100) return v.toFixed(0);
  return v.toPrecision(2);
}

/** lineChart draws the series right-aligned in capacity slots (the newest point at the right edge). */
export function lineChart(title: string, unit: string, series: Series[], capacity: number, seconds: number): HTMLElement {
  const n = Math.max(2, capacity, ...series.map((s) => s.points.length));
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.filter((p): p is number => p !== undefined && isFinite(p)))));
  const x = (i: number) => PAD.l + ((W - PAD.l - PAD.r) * i) / (n - 1);
  const y = (v: number) => H - PAD.b - ((H - PAD.t - PAD.b) * v) / max;
  const grid = [0, 0.5, 1].map((f) => [
    svg("line", { x1: PAD.l, x2: W - PAD.r, y1: y(max * f), y2: y(max * f), stroke: "#ddd", "stroke-width": 1 }),
    svg("text", { x: PAD.l - 4, y: y(max * f) + 4, "text-anchor": "end", "font-size": 10, fill: "#666" }),
  ]);
  grid.forEach(([, t], i) => (t.textContent = fmt((max * [0, 0.5, 1][i]) as number)));
  const lines = series.map((s) => {
    let d = "";
    let pen = false;
    s.points.forEach((p, i) => {
      if (p === undefined || !isFinite(p)) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${x(i + n - s.points.length).toFixed(1)},${y(p).toFixed(1)}`;
      pen = true;
    });
    return svg("path", { d: d || "M0,0", fill: "none", stroke: s.color, "stroke-width": 1.5 });
  });
  const axis = svg("text", { x: W - PAD.r, y: H - 4, "text-anchor": "end", "font-size": 10, fill: "#666" });
  axis.textContent = `last ${seconds} s`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" }, ...grid.flat(), ...lines, axis);
  chart.setAttribute("aria-label", title);
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", null, h("strong", null, title), ` (${unit}) `, series.map((s) => h("span", { class: `key key-${s.color.slice(1)}` }, "— ", s.name, " ", h("b", null, last(s.points))))),
    chart,
  );
}

function last(points: (number | undefined)[]): string {
  const v = points[points.length - 1];
  return v === undefined || !isFinite(v) ? "—" : fmt(v);
}
