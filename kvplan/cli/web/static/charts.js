// kvplan web: plain SVG drawing (no library). Draws what the API returned; computes nothing
// but positions on the screen.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, parent) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) hi = lo + 1;
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  const end = Math.ceil(hi / step - 1e-9) * step;  // the last tick covers hi
  for (let v = Math.ceil(lo / step) * step; v <= end + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

// series: [{label, color, points: [[x, y, {fail: bool}]], dashed}]; opts: {xlog2, xLabel, yLabel,
// xFmt, yFmt, marks: [{x, label}], hlines: [{y, label}], width, height}
function lineChart(container, series, opts) {
  container.textContent = "";
  const W = opts.width || 640, H = opts.height || 260, m = { l: 56, r: 14, t: 14, b: 40 };
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title || "chart" }, container);
  const all = series.flatMap((s) => s.points);
  if (!all.length) return svg;
  const fx = opts.xlog2 ? (x) => Math.log2(x) : (x) => x;
  let x0 = Math.min(...all.map((p) => fx(p[0]))), x1 = Math.max(...all.map((p) => fx(p[0])));
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  const ys = all.map((p) => p[1]).concat((opts.hlines || []).filter((h) => h.y <= Math.max(...all.map((p) => p[1])) * 1.5).map((h) => h.y));
  const yTicks = niceTicks(0, Math.max(...ys) * 1.05 || 1, 5);
  const y1 = yTicks[yTicks.length - 1];
  const X = (x) => m.l + ((fx(x) - x0) / (x1 - x0)) * (W - m.l - m.r);
  const Y = (y) => H - m.b - (y / y1) * (H - m.t - m.b);
  const grid = svgEl("g", { class: "grid" }, svg), axis = svgEl("g", { class: "axis" }, svg);
  for (const t of yTicks) {
    svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t) }, grid);
    svgEl("text", { x: m.l - 6, y: Y(t) + 4, "text-anchor": "end" }, axis).textContent = (opts.yFmt || String)(t);
  }
  const xs = opts.xlog2 ? [...new Set(all.map((p) => p[0]))] : niceTicks(Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0])), 6)
    .filter((t) => fx(t) >= x0 - 1e-9 && fx(t) <= x1 + 1e-9);
  for (const t of xs) {
    svgEl("line", { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4 }, axis);
    svgEl("text", { x: X(t), y: H - m.b + 16, "text-anchor": "middle" }, axis).textContent = (opts.xFmt || String)(t);
  }
  svgEl("line", { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }, axis);
  svgEl("line", { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b }, axis);
  svgEl("text", { x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle" }, axis).textContent = opts.xLabel || "";
  svgEl("text", { x: 12, y: (m.t + H - m.b) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(m.t + H - m.b) / 2})` }, axis).textContent = opts.yLabel || "";
  for (const h of opts.hlines || []) {
    if (h.y > y1) continue;
    svgEl("line", { x1: m.l, x2: W - m.r, y1: Y(h.y), y2: Y(h.y), stroke: "#b9770e", "stroke-dasharray": "4 3" }, svg);
    svgEl("text", { x: W - m.r - 4, y: Y(h.y) - 4, "text-anchor": "end", style: "fill:#b9770e" }, svg).textContent = h.label;
  }
  for (const mk of opts.marks || []) {
    svgEl("line", { x1: X(mk.x), x2: X(mk.x), y1: m.t, y2: H - m.b, stroke: "#2f6fde", "stroke-dasharray": "2 3" }, svg);
    svgEl("text", { x: X(mk.x) + 4, y: m.t + 10, style: "fill:#2f6fde" }, svg).textContent = mk.label;
  }
  series.forEach((s) => {
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join("");
    svgEl("path", { d, fill: "none", stroke: s.color, "stroke-width": 2, "stroke-dasharray": s.dashed ? "5 4" : "none" }, svg);
    for (const p of s.points) {
      const c = svgEl("circle", { cx: X(p[0]), cy: Y(p[1]), r: 3.2, fill: p[2] && p[2].fail ? "#c0392b" : s.color }, svg);
      svgEl("title", {}, c).textContent = `${s.label}: ${(opts.xFmt || String)(p[0])} -> ${(opts.yFmt || String)(p[1])}`;
    }
  });
  let lx = m.l + 8;
  for (const s of series) {
    svgEl("rect", { x: lx, y: m.t, width: 10, height: 10, fill: s.color }, svg);
    const t = svgEl("text", { x: lx + 14, y: m.t + 9 }, svg);
    t.textContent = s.label;
    lx += 24 + 6.5 * s.label.length;
  }
  return svg;
}

// parts: [{label, bytes, color}] left to right; total: bytes the bar stands for.
function stackedBar(container, parts, total) {
  container.textContent = "";
  const svg = svgEl("svg", { viewBox: "0 0 1000 34", preserveAspectRatio: "none", role: "img", "aria-label": "memory per GPU" }, container);
  let x = 0;
  for (const p of parts) {
    const w = (p.bytes / total) * 1000;
    const r = svgEl("rect", { x, y: 0, width: Math.max(w, 0), height: 34, fill: p.color, "data-label": p.label }, svg);
    svgEl("title", {}, r).textContent = p.label;
    x += w;
  }
  return svg;
}

window.kvplanCharts = { lineChart, stackedBar };
