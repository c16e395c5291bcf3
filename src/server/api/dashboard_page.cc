// The page GET /dashboard serves: HTML, CSS and JavaScript in one string, nothing
// fetched from elsewhere. It polls the JSON routes of the cache API (docs/api.md)
// every two seconds, sending the key entered on the page (sessionStorage) as
// `Authorization: Bearer KEY`, and builds every element with textContent (namespace
// names and salts are the callers' strings, never parsed as HTML).
namespace pc::server {

const char* dashboard_page() {
  return R"PAGE(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>promptcache dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:16px;margin:0}
header input{width:220px}
#status{margin-left:auto;font-size:12px;opacity:.85}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px;padding:12px}
section{background:#fff;border-radius:6px;padding:10px 12px;box-shadow:0 1px 2px #0002;overflow:auto}
section.wide{grid-column:1/-1}
h2{font-size:14px;margin:0 0 8px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #e4e6eb;white-space:nowrap}
th{font-weight:600;color:#555}
td.num,th.num{text-align:right}
#capacity td{white-space:normal}
.big{font-size:22px;font-weight:600}
.kpis{display:flex;gap:24px;flex-wrap:wrap}
.kpi span{display:block;color:#666;font-size:11px}
.bar{background:#e4e6eb;border-radius:3px;height:10px;width:160px;display:inline-block;vertical-align:middle}
.bar i{display:block;height:10px;border-radius:3px;background:#3b82f6}
button{font-size:11px;padding:1px 6px;margin-right:2px;cursor:pointer}
.pinned{color:#b45309;font-weight:600}
svg{width:100%;height:140px;background:#fafbfc;border:1px solid #e4e6eb}
.legend span{margin-right:12px}
.err{color:#b91c1c}
</style></head>
<body>
<header><h1>promptcache</h1>
<label>API key <input id="key" type="password" placeholder="(none)" autocomplete="off"></label>
<button id="connect">Use key</button>
<span id="scope"></span><span id="status">loading…</span></header>
<main>
<section><h2>Capacity</h2><table id="capacity"></table></section>
<section><h2>Requests</h2><div class="kpis">
<div class="kpi"><span>hit rate (cached / prompt tokens, since start)</span><b id="hit-rate" class="big">–</b></div>
<div class="kpi"><span>requests</span><b id="request-count" class="big">–</b></div>
<div class="kpi"><span>namespaces</span><b id="ns-count" class="big">–</b></div>
<div class="kpi"><span>entries</span><b id="entry-count" class="big">–</b></div>
</div></section>
<section><h2>Hit rate, last 5 minutes</h2><svg id="chart-hit" viewBox="0 0 600 140" preserveAspectRatio="none"></svg></section>
<section><h2>Cached vs computed prompt tokens per second</h2><svg id="chart-tokens" viewBox="0 0 600 140" preserveAspectRatio="none"></svg>
<div class="legend"><span style="color:#16a34a">■ cached</span><span style="color:#f59e0b">■ approximate</span><span style="color:#dc2626">■ computed</span></div></section>
<section><h2>Time to first token (p50 / p95)</h2><svg id="chart-ttft" viewBox="0 0 600 140" preserveAspectRatio="none"></svg>
<div class="legend"><span style="color:#3b82f6">— p50</span><span style="color:#9333ea">— p95</span><span id="ttft-summary"></span></div></section>
<section><h2>Miss reasons, last 5 minutes</h2><table id="misses"></table></section>
<section class="wide"><h2>Namespaces</h2><table id="namespaces"></table></section>
<section class="wide"><h2>Entries</h2><table id="entries"></table></section>
<section class="wide"><h2>PML schemas and modules</h2><table id="modules"></table></section>
<section class="wide"><h2>Last requests</h2><table id="requests"></table></section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem("promptcache-key") || "";
$("key").value = key;
$("connect").onclick = () => { key = $("key").value.trim(); sessionStorage.setItem("promptcache-key", key); refresh(); };

async function api(path, method, body) {
  const headers = {};
  if (key) headers["Authorization"] = "Bearer " + key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {method: method || "GET", headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const j = await r.json().catch(() => null);
  if (!r.ok) throw new Error((j && j.error && j.error.message) || ("HTTP " + r.status));
  return j;
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e[k] = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === null || k === undefined ? "" : String(k)));
  return e;
}
function fill(table, head, rows) {
  table.replaceChildren(el("tr", {}, ...head.map((h) => el("th", {class: numeric.has(h) ? "num" : ""}, h))), ...rows);
}
const numeric = new Set(["tokens", "bytes", "hits", "entries", "modules", "idle", "expires in", "prompt", "cached", "approximate", "computed", "generated", "ttft", "total", "requests"]);
const td = (v, cls) => el("td", cls ? {class: cls} : {}, v);
const num = (v) => td(v, "num");
function bytes(n) {
  if (n === undefined || n === null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; let x = n;
  while (x >= 1024 && i < u.length - 1) { x /= 1024; ++i; }
  return (i ? x.toFixed(1) : x) + " " + u[i];
}
const secs = (s) => s === null || s === undefined ? "–" : s < 60 ? s.toFixed(1) + " s" : s < 3600 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
const ms = (s) => s === null || s === undefined ? "–" : (s * 1000).toFixed(1) + " ms";
const pct = (x) => x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%";
function usage(used, cap) {
  const share = cap > 0 ? Math.min(1, used / cap) : 0;
  const bar = el("span", {class: "bar"}, el("i", {style: "width:" + (100 * share).toFixed(1) + "%"}));
  return el("td", {}, bar, " " + bytes(used) + (cap >= 0 ? " / " + bytes(cap) : ""));
}

async function act(op, id, ns) {
  try {
    await api("/v1/cache/entries/" + encodeURIComponent(id) + "/" + op, "POST", {namespace: ns});
  } catch (e) { $("status").textContent = op + " " + id + ": " + e.message; $("status").className = "err"; }
  refresh();
}
const buttons = (id, ns) => el("td", {}, ...["pin", "unpin", "evict"].map((op) =>
  el("button", {"data-action": op, "data-id": id, "data-ns": ns, onclick: () => act(op, id, ns)}, op)));

function chart(svg, series, maxY, now, window) {
  svg.replaceChildren();
  const W = 600, H = 140, ns = "http://www.w3.org/2000/svg";
  const x = (t) => W * (1 - (now - t) / window), y = (v) => H - 4 - (H - 8) * (maxY > 0 ? v / maxY : 0);
  for (const s of series) {
    if (s.bars) {
      for (const p of s.points) {
        const r = document.createElementNS(ns, "rect");
        const top = y(p.top), bottom = y(p.bottom);
        r.setAttribute("x", x(p.t) - 1); r.setAttribute("width", Math.max(1.5, W / window - 0.5));
        r.setAttribute("y", top); r.setAttribute("height", Math.max(0, bottom - top)); r.setAttribute("fill", s.color);
        svg.append(r);
      }
      continue;
    }
    const pts = s.points.filter((p) => p.v !== null && p.v !== undefined);
    if (!pts.length) continue;
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", pts.map((p) => x(p.t).toFixed(1) + "," + y(p.v).toFixed(1)).join(" "));
    line.setAttribute("fill", "none"); line.setAttribute("stroke", s.color); line.setAttribute("stroke-width", "2");
    svg.append(line);
    for (const p of pts) {
      const c = document.createElementNS(ns, "circle");
      c.setAttribute("cx", x(p.t)); c.setAttribute("cy", y(p.v)); c.setAttribute("r", 2.5); c.setAttribute("fill", s.color);
      svg.append(c);
    }
  }
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", 4); label.setAttribute("y", 12); label.setAttribute("font-size", 10); label.setAttribute("fill", "#666");
  label.textContent = "max " + (series.unit ? series.unit(maxY) : maxY);
  svg.append(label);
}

function showCapacity(stats) {
  const rows = [];
  const m = stats.memory || {};
  const mb = m.bytes || {};
  rows.push(el("tr", {"data-tier": "memory"}, td("memory"), usage(mb.in_use !== undefined ? mb.in_use + mb.cached : mb.cached, mb.capacity),
    td(mb.in_use !== undefined ? "in use " + bytes(mb.in_use) + ", cached " + bytes(mb.cached) + ", free " + bytes(mb.free) : "your namespaces")));
  const tiers = stats.tiers;
  if (tiers) for (const name of tiers.order || []) {
    const t = tiers[name] || {};
    rows.push(el("tr", {"data-tier": name}, td(name), usage(t.bytes || 0, t.capacity !== undefined ? t.capacity : -1),
      td((t.connected === false ? "disconnected · " : "") + (t.entries !== undefined ? t.entries + " entries" : "") +
         (t.hits !== undefined ? " · " + t.hits + " hits" : "") + (t.ttl_seconds !== undefined ? " · ttl " + secs(t.ttl_seconds) : ""))));
  }
  fill($("capacity"), ["tier", "use / capacity", ""], rows);
}

function showEntries(list) {
  const now = Date.now() / 1000;
  const rows = [], mods = [];
  let count = 0;
  for (const ns of list.namespaces) {
    for (const e of ns.entries) {
      ++count;
      const left = e.ttl_seconds !== undefined && e.ttl_seconds !== null ? e.ttl_seconds : e.expires_at ? e.expires_at - now : null;
      rows.push(el("tr", {"data-entry": e.id, "data-ns": ns.namespace}, td(ns.namespace || "(shared)"), td(e.id), td(e.tier),
        num(e.tokens), num(bytes(e.bytes)), num(e.hits === undefined ? "–" : e.hits), num(e.idle_seconds === undefined ? "–" : secs(e.idle_seconds)),
        el("td", {class: e.pinned ? "pinned" : ""}, e.pinned ? "pinned" : ""), num(left === null ? "–" : secs(left)),
        e.tier === "memory" ? buttons(String(e.id), ns.namespace) : td("")));
    }
    for (const m of ns.modules) {
      mods.push(el("tr", {"data-module": m.id, "data-ns": ns.namespace}, td(ns.namespace || "(shared)"), td(m.path), td(m.shift),
        num(m.tokens), num(bytes(m.bytes)), num(m.hits), el("td", {class: m.pinned ? "pinned" : ""}, m.pinned ? "pinned" : ""),
        num(m.ttl_seconds === null ? "–" : secs(m.ttl_seconds)), buttons(m.id, ns.namespace)));
    }
  }
  $("entry-count").textContent = count;
  $("entry-count").dataset.value = count;
  fill($("entries"), ["namespace", "id", "tier", "tokens", "bytes", "hits", "idle", "pin", "expires in", ""], rows);
  return mods;
}

function showNamespaces(list, mods) {
  const rows = [], schemaRows = [];
  for (const ns of list.namespaces) {
    const tiers = Object.entries(ns.tiers).map(([t, u]) => t + ": " + u.entries + " / " + bytes(u.bytes)).join(", ");
    rows.push(el("tr", {"data-namespace": ns.namespace}, td(ns.namespace || "(shared)"), td(ns.metrics_label), num(ns.memory.entries),
      num(bytes(ns.memory.bytes)), num(ns.modules.entries), num(bytes(ns.modules.bytes)), td(tiers || "–"), td(ns.schemas.join(", ") || "–")));
    for (const s of ns.schemas) schemaRows.push(el("tr", {}, td(ns.namespace || "(shared)"), td("schema " + s), td(""), td(""), td(""), td(""), td(""), td(""), td("")));
  }
  $("ns-count").textContent = list.namespaces.length;
  $("ns-count").dataset.value = list.namespaces.length;
  fill($("namespaces"), ["namespace", "metrics label", "entries", "bytes", "modules", "module bytes", "tiers", "schemas"], rows);
  fill($("modules"), ["namespace", "module", "shift", "tokens", "bytes", "hits", "pin", "expires in", ""], [...schemaRows, ...mods]);
}

function showHistory(h) {
  const s = h.seconds, now = Math.floor(h.now), win = h.window_seconds;
  chart($("chart-hit"), Object.assign([{color: "#3b82f6", points: s.map((b) => ({t: b.t, v: b.hit_rate}))}], {unit: pct}), 1, now, win);
  let maxTok = 0;
  const stack = [[], [], []];
  for (const b of s) {
    const a = b.cached_tokens, c = a + b.approximate_tokens, d = c + b.computed_tokens;
    maxTok = Math.max(maxTok, d);
    stack[0].push({t: b.t, bottom: 0, top: a}); stack[1].push({t: b.t, bottom: a, top: c}); stack[2].push({t: b.t, bottom: c, top: d});
  }
  chart($("chart-tokens"), [{bars: true, color: "#16a34a", points: stack[0]}, {bars: true, color: "#f59e0b", points: stack[1]},
    {bars: true, color: "#dc2626", points: stack[2]}], maxTok, now, win);
  let maxT = 0;
  for (const b of s) maxT = Math.max(maxT, b.ttft_p95 || 0);
  chart($("chart-ttft"), Object.assign([{color: "#3b82f6", points: s.map((b) => ({t: b.t, v: b.ttft_p50}))},
    {color: "#9333ea", points: s.map((b) => ({t: b.t, v: b.ttft_p95}))}], {unit: ms}), maxT, now, win);
  const t = h.totals;
  $("ttft-summary").textContent = "window: p50 " + ms(t.ttft_p50) + ", p95 " + ms(t.ttft_p95) + ", p99 " + ms(t.ttft_p99);
  const reasons = Object.entries(t.misses).sort((a, b) => b[1] - a[1]);
  fill($("misses"), ["reason", "requests"], reasons.length ? reasons.map(([r, n]) => el("tr", {"data-reason": r}, td(r), num(n)))
    : [el("tr", {}, td("no misses"), td(""))]);
}

function showRequests(r) {
  fill($("requests"), ["time", "route", "namespace", "prompt", "cached", "approximate", "computed", "generated", "ttft", "total", "miss", "finish"],
    r.data.map((q) => el("tr", {}, td(new Date(q.time * 1000).toLocaleTimeString()), td(q.route), td(q.namespace || "(shared)"),
      num(q.prompt_tokens), num(q.cached_tokens), num(q.approximate_tokens), num(q.computed_tokens), num(q.generated_tokens),
      num(ms(q.ttft_seconds)), num(ms(q.total_seconds)), td(q.miss_reason || ""), td(q.finish_reason))));
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const [stats, nss, entries, hist, reqs] = await Promise.all([api("/v1/cache/stats"), api("/v1/cache/namespaces"),
      api("/v1/cache/entries"), api("/v1/cache/history?seconds=300"), api("/v1/cache/requests?limit=30")]);
    showCapacity(stats);
    const rate = stats.engine.hit_rate;
    $("hit-rate").textContent = pct(rate);
    $("hit-rate").dataset.value = rate;
    $("request-count").textContent = stats.engine.requests;
    showNamespaces(nss, showEntries(entries));
    showHistory(hist);
    showRequests(reqs);
    $("scope").textContent = nss.all ? "all namespaces" : "tenant " + nss.tenant;
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
    $("status").className = "";
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  } catch (e) {
    $("status").textContent = e.message;
    $("status").className = "err";
  } finally { busy = false; }
}
refresh();
setInterval(refresh, 2000);
</script></body></html>
)PAGE";
}

}  // namespace pc::server
