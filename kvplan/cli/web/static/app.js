// kvplan web page: a client of /api/v1 (the documents `kvplan ... --format json` prints).
// It shows those documents; it computes no plan of its own. The form's inputs live in the URL's
// query (keys = the API's keys), so a link reopens the same view.
"use strict";

const $ = (sel) => document.querySelector(sel);
const form = $("#form");
const PERF_KEYS = ["input_len", "output_len", "concurrency", "num_requests"];
const GiB = 2 ** 30;
const COLORS = {
  "weights": "#4c72b0", "activation peak": "#dd8452", "non-torch": "#8172b3", "CUDA graphs": "#937860",
  "KV cache": "#55a868", "CUDA graphs (after sizing)": "#c44e52", "unused": "#d0d4dc",
};
let options = null;
let gpuList = [];
let lastDoc = null;

const int = (n) => Number(n).toLocaleString("en-US");
const gib = (b) => (b / GiB).toFixed(2) + " GiB";

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const r = await fetch(path, init);
  const type = r.headers.get("Content-Type") || "";
  const data = type.startsWith("application/json") ? await r.json() : await r.text();
  if (!r.ok) {
    const e = new Error(data && data.error ? data.error : `HTTP ${r.status}`);
    e.hint = data && data.hint;
    throw e;
  }
  return data;
}

function fields() { return [...form.querySelectorAll("[name]")]; }

// The form -> {key: value} of the non-empty inputs (what goes in the URL).
function formState() {
  const out = {};
  for (const el of fields()) {
    if (el.disabled) continue;
    if (el.type === "checkbox") { if (el.checked) out[el.name] = true; }
    else if (el.value.trim() !== "") out[el.name] = el.value.trim();
  }
  return out;
}

function setFormState(state) {
  for (const el of fields()) {
    const v = state[el.name];
    if (el.type === "checkbox") { el.checked = v === true || v === "true" || v === "1"; continue; }
    if (v === undefined) continue;
    el.value = v;
    if (el.tagName === "SELECT" && el.value !== v) {
      // a GPU alias (A100-80GB): the profile that lists it (`kvplan gpus`); else kept as given, for the API to judge
      const low = v.toLowerCase(), g = el.name === "gpu" && gpuList.find((p) => p.aliases.some((a) => a.toLowerCase() === low));
      if (!g) el.add(new Option(v, v));
      el.value = g ? g.id : v;
    }
  }
}

function urlState() {
  const q = new URLSearchParams(location.search), out = {};
  for (const [k, v] of q) out[k] = v;
  return out;
}

function writeUrl(state, perf) {
  const q = new URLSearchParams(state);
  if (perf) q.set("perf", "1");
  history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
}

// The request body of `command` from the form state: only the keys that command takes, typed as
// the API describes them.
function body(command, state) {
  const keys = options.commands[command], out = {};
  for (const [k, v] of Object.entries(state)) {
    const d = keys[k];
    if (!d) continue;
    if (d.type === "integer") out[k] = /^-?\d+$/.test(v) ? Number(v) : v;
    else if (d.type === "number") out[k] = Number.isFinite(Number(v)) ? Number(v) : v;
    else out[k] = v;
  }
  return out;
}

function showError(e) {
  const box = $("#error");
  box.textContent = "error: " + e.message + (e.hint ? "\n  hint: " + e.hint : "");
  box.hidden = false;
}

async function estimate() {
  const state = formState();
  writeUrl(state, !$("#perf").hidden || urlState().perf === "1");
  $("#error").hidden = true;
  const b = body("estimate", state);
  if (!b.model) { showError(new Error("MODEL: empty model name")); return; }
  $("#run").disabled = true;
  try {
    const [doc, yaml] = await Promise.all([
      api("/api/v1/estimate", { ...b, curves: true }),
      api("/api/v1/estimate?format=yaml", b),
    ]);
    lastDoc = doc;
    render(doc, yaml);
  } catch (e) {
    showError(e);
  } finally {
    $("#run").disabled = false;
  }
}

function stat(label, value, wide) {
  const d = document.createElement("div");
  if (wide) d.className = "wide";
  d.innerHTML = "<dt></dt><dd></dd>";
  d.querySelector("dt").textContent = label;
  d.querySelector("dd").textContent = value;
  d.dataset.key = label;
  return d;
}

function render(doc, yaml) {
  $("#empty").hidden = true;
  $("#out").hidden = false;
  const eng = doc.engine, kv = doc.kv_cache;
  $("#title").textContent = `${doc.model.name} on ${doc.gpu.count}x ${doc.gpu.label} (TP=${eng.tensor_parallel_size}, PP=${eng.pipeline_parallel_size}) - vLLM ${doc.vllm.version}`;
  $("#gpu-count").textContent = `${doc.gpu.count} (from the last estimate)`;
  const verdict = $("#verdict");
  verdict.textContent = doc.fits ? "starts" : "does not start: " + doc.failure +
    (doc.largest_max_model_len ? ` (largest --max-model-len that fits: ${int(doc.largest_max_model_len)})` : "");
  verdict.className = "verdict " + (doc.fits ? "fits" : "fails");
  $("#evidence").textContent = doc.evidence ? `evidence: vLLM ${doc.vllm.version} (${doc.vllm.reason}): ${doc.evidence.label}` : "";
  const notes = $("#notes");
  notes.textContent = "";
  const addNote = (text, cls) => { const li = document.createElement("li"); li.textContent = text; if (cls) li.className = cls; notes.appendChild(li); };
  if (!doc.exact) for (const a of doc.approximate) addNote("approximate: " + a, "approx");
  for (const w of doc.warnings) addNote("warning: " + w);
  for (const n of doc.notes) addNote("note: " + n);

  const parts = (doc.curves ? doc.curves.memory : []).map((p) => ({ ...p, color: COLORS[p.label] || "#999" }));
  kvplanCharts.stackedBar($("#membar"), parts, doc.memory.total_bytes);
  const legend = $("#legend");
  legend.textContent = "";
  for (const p of parts) {
    const s = document.createElement("span");
    s.innerHTML = `<i style="background:${p.color}"></i>`;
    s.append(`${p.label} ${gib(p.bytes)}`);
    legend.appendChild(s);
  }
  const tail = document.createElement("span");
  tail.textContent = `of ${gib(doc.memory.total_bytes)} (requested ${gib(doc.memory.requested_bytes)})`;
  legend.appendChild(tail);

  const stats = $("#stats");
  stats.textContent = "";
  stats.append(
    stat("num_gpu_blocks", int(kv.num_gpu_blocks)),
    stat("block_size (tokens)", int(kv.block_size)),
    stat("GPU KV cache size (tokens)", int(kv.gpu_kv_cache_tokens)),
    stat(`max concurrency at ${int(kv.max_model_len)} tokens`, kv.max_concurrency.toFixed(2) + "x"),
    stat("KV cache per GPU", gib(doc.memory.kv_cache_bytes)),
    stat("max_num_seqs", int(eng.max_num_seqs)),
    stat("binding limit", doc.binding_limit === "kv_cache"
      ? `KV cache: ${kv.max_concurrency.toFixed(2)} max-length requests fit, below max_num_seqs=${eng.max_num_seqs}`
      : `max_num_seqs=${eng.max_num_seqs}: the KV cache holds ${kv.max_concurrency.toFixed(2)} max-length requests`, true),
  );
  for (const [flag, r] of Object.entries(doc.recommendations || {})) {
    stats.append(stat(`recommended ${flag} ${r.value}${r.kind === "optional" ? " (optional, not in the serve line)" : ""}`, r.reason, true));
  }
  $("#serve").textContent = (doc.serve_env ? Object.entries(doc.serve_env).map(([k, v]) => `${k}=${v} `).join("") : "") + doc.serve_command;
  $("#yaml").textContent = yaml;
  $("#json").textContent = JSON.stringify(doc, null, 2);
  drawCurve(doc);
}

function tokens(x) { return x >= 1024 && x % 1024 === 0 ? x / 1024 + "k" : String(x); }

function drawCurve(doc) {
  const c = doc.curves;
  if (!c) return;
  const pts = c.by_max_model_len.map((p) => [p.x, p.max_concurrency, { fail: !p.fits }]);
  kvplanCharts.lineChart($("#curve"), [{ label: "max concurrency (vLLM's log line)", color: "#55a868", points: pts }], {
    width: 900, height: 300, xlog2: true, xLabel: "--max-model-len (tokens)", yLabel: "requests at once", xFmt: tokens,
    yFmt: (v) => (v >= 100 ? int(Math.round(v)) : +v.toFixed(2)),
    marks: [{ x: c.current_max_model_len, label: "this plan" }],
    hlines: [{ y: c.max_num_seqs, label: `--max-num-seqs ${c.max_num_seqs}` }],
    title: "concurrency against --max-model-len",
  });
}

async function perf() {
  const state = formState();
  writeUrl(state, true);
  $("#error").hidden = true;
  const btn = $("#run-perf");
  btn.disabled = true;
  btn.textContent = "Running the scheduler emulation...";
  const b = body("perf", state);
  if (b.input_len === undefined && b.output_len === undefined) { b.input_len = 1024; b.output_len = 256; }
  if (b.concurrency === undefined && b.request_rate === undefined) b.concurrency = 64;
  if (b.num_requests === undefined) b.num_requests = 300;
  try {
    renderPerf(await api("/api/v1/perf", b));
  } catch (e) {
    showError(e);
  } finally {
    btn.disabled = false;
    btn.textContent = "Predict latency against load";
  }
}

function renderPerf(doc) {
  $("#perf").hidden = false;
  $("#perf-label").textContent = doc.calibration ? `(${doc.calibration.label})` : "";
  const m = doc.metrics, ms = (s) => (s * 1000).toFixed(1) + " ms";
  $("#perf-summary").textContent = `throughput ${int(Math.round(m.output_throughput))} output tok/s, ${m.request_throughput.toFixed(2)} req/s; ` +
    `TTFT p50 ${ms(m.ttft_s.p50)}, TPOT p50 ${ms(m.tpot_s.p50)}` +
    (doc.saturation && doc.saturation.rate ? `; saturation ${doc.saturation.rate.toFixed(2)} req/s` : "");
  const pts = (doc.saturation && doc.saturation.points) || [];
  const x = (p) => p.request_throughput;
  const chart = (el, key, label) => kvplanCharts.lineChart(el, [
    { label: label + " p50", color: "#4c72b0", points: pts.map((p) => [x(p), p[key + "_p50_s"] * 1000]) },
    { label: label + " p99", color: "#dd8452", points: pts.map((p) => [x(p), p[key + "_p99_s"] * 1000]), dashed: true },
  ], { xLabel: "load (requests/s served)", yLabel: label + " (ms)", xFmt: (v) => +v.toFixed(1), yFmt: (v) => +v.toFixed(1), width: 420, height: 240 });
  chart($("#perf-ttft"), "ttft", "TTFT");
  chart($("#perf-tpot"), "tpot", "TPOT");
  const notes = $("#perf-notes");
  notes.textContent = "";
  for (const a of doc.approximate || []) {
    const li = document.createElement("li");
    li.className = "approx";
    li.textContent = "approximate: " + a;
    notes.appendChild(li);
  }
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {  // no clipboard permission: select the text for Ctrl-C
    const ta = document.createElement("textarea");
    ta.value = text; document.body.appendChild(ta); ta.select(); document.execCommand("copy"); ta.remove();
  }
  const old = button.textContent;
  button.textContent = "copied";
  setTimeout(() => { button.textContent = old; }, 1200);
}

function fillSelect(sel, values, first) {
  sel.textContent = "";
  if (first !== undefined) sel.add(new Option(first, ""));
  for (const v of values) sel.add(new Option(v, v));
}

// Fields the API does not take (e.g. -dp / -ep before kvplan models them) are shown disabled.
function gateFields() {
  const keys = options.commands.estimate, off = [];
  for (const el of fields()) {
    if (PERF_KEYS.includes(el.name)) continue;
    const ok = el.name in keys;
    el.disabled = !ok;
    el.closest("label")?.classList.toggle("disabled", !ok);
    if (!ok) { el.title = "this kvplan's estimate does not take this flag yet"; off.push(el.closest("label").textContent.trim()); }
  }
  const hint = $("#parallel-hint");
  hint.hidden = !off.length;
  hint.textContent = off.length ? `${off.join(", ")}: not taken by this kvplan's estimate yet` : "";
}

async function init() {
  [options] = await Promise.all([api("/api/v1/options")]);
  const [gpus, models] = await Promise.all([api("/api/v1/gpus"), api("/api/v1/models")]);
  const list = $("#model-list");
  for (const id of models.bundled) list.appendChild(new Option(id));
  if (models.local_paths_allowed) $("#model-hint").textContent += ", or a local directory holding config.json";
  const gsel = $("#gpu");
  gpuList = gpus;
  for (const g of gpus) gsel.add(new Option(`${g.name} (${g.id})`, g.id));
  gsel.value = (gpus.find((g) => g.id === "h200") || gpus[0]).id;
  fillSelect(form.elements.kv_cache_dtype, options.kv_cache_dtypes);
  fillSelect(form.elements.vllm_version, options.vllm_versions, `default (${options.default_vllm_version} unless vllm is installed)`);
  const ql = $("#quant-list");
  for (const q of options.quantizations) ql.appendChild(new Option(q));
  gateFields();
  const state = urlState();
  setFormState(state);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); estimate(); });
  $("#run-perf").addEventListener("click", perf);
  $("#copy-link").addEventListener("click", (ev) => { writeUrl(formState(), !$("#perf").hidden); copy(location.href, ev.target); });
  for (const b of document.querySelectorAll("button.copy")) b.addEventListener("click", () => copy($("#" + b.dataset.copy).textContent, b));
  if (state.model) {
    await estimate();
    if (state.perf === "1") await perf();
  }
}

init().catch(showError).finally(() => { document.body.dataset.ready = "1"; });
