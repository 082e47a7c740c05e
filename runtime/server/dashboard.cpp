// GET /: the live cache dashboard. One self-contained page (inline CSS, JS and SVG,
// no external resources) that polls the JSON endpoints with the key kept in
// localStorage.
#include "runtime/server/api.hpp"

namespace arbor::server {

const std::string& dashboard_html() {
  static const std::string html = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Arbor cache dashboard</title>
<link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 18px;display:flex;gap:16px;align-items:center}
header h1{font-size:17px;margin:0;flex:1}
header input{width:220px;padding:3px 6px}
main{display:grid;grid-template-columns:1fr 1fr;gap:14px;padding:14px}
section{background:#fff;border-radius:6px;padding:10px 14px;box-shadow:0 1px 2px #0002}
section.wide{grid-column:1 / span 2}
h2{font-size:14px;margin:0 0 8px 0;color:#445}
.big{font-size:28px;font-weight:600}
table{border-collapse:collapse;width:100%;font-size:13px}
td,th{padding:3px 6px;border-bottom:1px solid #e4e6ea;text-align:right}
td:first-child,th:first-child{text-align:left}
.bar{display:flex;height:22px;border-radius:4px;overflow:hidden;background:#e4e6ea}
.bar div{height:100%}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
#status{font-size:12px;color:#9ab}
#tree{width:100%;overflow:auto;max-height:520px}
#tree text{font-size:11px}
</style></head><body>
<header><h1>Arbor &mdash; shared-prefix KV cache</h1>
<span id="status">connecting&hellip;</span>
<label>API key <input id="key" type="password" placeholder="(none: no auth)"></label></header>
<main>
<section><h2>Cache hit ratio (cached / prompt tokens)</h2><div class="big" id="ratio">&ndash;</div>
<canvas id="chart" width="560" height="160" style="width:100%;height:160px"></canvas></section>
<section><h2>KV pages</h2><div class="big" id="pagesum">&ndash;</div>
<div class="bar" id="pagebar"></div>
<div class="legend" id="pagelegend"></div>
<table id="globals" style="margin-top:10px"></table></section>
<section class="wide" id="nodesection" hidden><h2>Cluster nodes (routed: prefix / balance / cold)</h2>
<table id="nodes"></table></section>
<section><h2>Tenants</h2><table id="tenants"></table></section>
<section><h2>Runs</h2><table id="runs"></table></section>
<section class="wide"><h2>Radix tree of <span id="treetenant">&ndash;</span>
(edge width = tokens, number = sequences sharing the prefix)</h2><div id="tree"></div></section>
</main>
<script>
"use strict";
const keyInput = document.getElementById("key");
keyInput.value = localStorage.getItem("arbor_key") || "";
keyInput.addEventListener("change", () => { localStorage.setItem("arbor_key", keyInput.value); poll(); });
const ratios = [];
const COLORS = {locked:"#d9534f", cached_idle:"#5b8def", other:"#9aa5b8", free:"#e4e6ea"};

async function get(path) {
  const headers = keyInput.value ? {"Authorization": "Bearer " + keyInput.value} : {};
  const r = await fetch(path, {headers});
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}
function el(tag, text) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
function fillTable(id, head, rows) {
  const t = document.getElementById(id); t.replaceChildren();
  const tr = el("tr"); head.forEach(h => tr.appendChild(el("th", h))); t.appendChild(tr);
  rows.forEach(r => { const row = el("tr"); r.forEach(c => row.appendChild(el("td", String(c)))); t.appendChild(row); });
}
const pct = x => (100 * (x || 0)).toFixed(1) + "%";

function drawChart() {
  const c = document.getElementById("chart"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  g.strokeStyle = "#e4e6ea"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) { const y = 5 + i * (c.height - 10) / 4; g.beginPath(); g.moveTo(0, y); g.lineTo(c.width, y); g.stroke(); }
  if (ratios.length < 2) return;
  g.strokeStyle = "#2f7d32"; g.lineWidth = 2; g.beginPath();
  ratios.forEach((v, i) => {
    const x = i * c.width / (ratios.length - 1), y = 5 + (1 - v) * (c.height - 10);
    i ? g.lineTo(x, y) : g.moveTo(x, y);
  });
  g.stroke();
}

function showStats(s) {
  const global = s.global || {};
  const served = s.served || {};
  let prompt = 0, cached = 0;
  Object.values(served).forEach(t => { prompt += t.prompt_tokens; cached += t.cached_tokens; });
  const ratio = global.prompt_tokens !== undefined ? global.hit_ratio : (prompt ? cached / prompt : 0);
  document.getElementById("ratio").textContent = pct(ratio);
  ratios.push(ratio || 0); if (ratios.length > 120) ratios.shift();
  drawChart();
  const total = global.pages_total !== undefined ? global.pages_total : (s.pool || {}).pages_total || 0;
  const locked = global.pages_locked || 0, idle = global.pages_cached_idle || 0;
  const used = global.pages_used !== undefined ? global.pages_used :
      Object.values(s.tenants || {}).reduce((a, t) => a + t.used_pages, 0);
  const parts = {locked, cached_idle: idle, other: Math.max(0, used - locked - idle), free: Math.max(0, total - used)};
  document.getElementById("pagesum").textContent = used + " / " + total + " used";
  const bar = document.getElementById("pagebar"), legend = document.getElementById("pagelegend");
  bar.replaceChildren(); legend.replaceChildren();
  Object.entries(parts).forEach(([k, v]) => {
    const d = el("div"); d.style.width = (total ? 100 * v / total : 0) + "%"; d.style.background = COLORS[k]; d.title = k + ": " + v;
    bar.appendChild(d);
    const span = el("span"), i = el("i"); i.style.background = COLORS[k]; span.appendChild(i); span.appendChild(document.createTextNode(k.replace("_", " ") + " " + v));
    legend.appendChild(span);
  });
  fillTable("globals", ["figure", "value"], Object.entries(global).filter(([k]) => !k.startsWith("pages_")));
  const names = new Set([...Object.keys(s.tenants || {}), ...Object.keys(served)]);
  fillTable("tenants", ["tenant", "prompt", "cached", "hit ratio", "generated", "pages", "in flight"],
    [...names].map(n => {
      const sv = served[n] || {}, c = (s.tenants || {})[n] || {};
      return [n, sv.prompt_tokens || 0, sv.cached_tokens || 0, pct(sv.hit_ratio), sv.generated_tokens || 0, c.used_pages || 0, sv.inflight || 0];
    }));
}

// A cluster router's nodes: the router's view (load, index, decisions) and each node's
// own figures (null while the node is down or silent).
function showNodes(nodes) {
  const section = document.getElementById("nodesection");
  section.hidden = !Array.isArray(nodes);
  if (section.hidden) return;
  const orDash = v => (v === null || v === undefined ? "\u2013" : v);
  const decisions = r => (r ? r.prefix + " / " + r.balance + " / " + r.cold : "\u2013");
  fillTable("nodes", ["node", "state", "in flight", "runs", "queued", "pages used", "indexed pages", "hit ratio",
                      "requests routed", "runs routed", "retried", "runs retried", "rejoins"],
    nodes.map(n => [n.node, n.up ? "up" : "down", n.inflight, orDash(n.runs), orDash(n.queued_requests),
      n.pages_total === null ? "\u2013" : (n.pages_total - n.pages_free) + " / " + n.pages_total, n.indexed_pages,
      n.hit_ratio === null ? "\u2013" : pct(n.hit_ratio), decisions(n.routed), decisions(n.runs_routed),
      n.retried, orDash(n.runs_retried), n.rejoins]));
}

function showTree(t) {
  document.getElementById("treetenant").textContent = t.tenant;
  const nodes = t.nodes || [], byId = new Map(), kids = new Map();
  nodes.forEach(n => { byId.set(n.id, n); kids.set(n.id, []); });
  const roots = [];
  nodes.forEach(n => (byId.has(n.parent) && n.parent !== n.id ? kids.get(n.parent).push(n) : roots.push(n)));
  // Leaves below a node = how many sequences share its prefix.
  const leaves = n => { const k = kids.get(n.id); n.leaves = k.length ? k.reduce((a, c) => a + leaves(c), 0) : 1; return n.leaves; };
  roots.forEach(leaves);
  const rowH = 22, colW = 190, pos = new Map(); let row = 0, maxDepth = 0;
  const place = (n, depth) => {
    const k = kids.get(n.id); maxDepth = Math.max(maxDepth, depth);
    if (!k.length) { pos.set(n.id, {x: depth * colW, y: row++ * rowH}); return; }
    k.forEach(c => place(c, depth + 1));
    const ys = k.map(c => pos.get(c.id).y);
    pos.set(n.id, {x: depth * colW, y: (Math.min(...ys) + Math.max(...ys)) / 2});
  };
  roots.forEach(r => place(r, 0));
  const NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg");
  const W = (maxDepth + 1) * colW + 40, H = Math.max(1, row) * rowH + 20;
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  const maxTok = Math.max(1, ...nodes.map(n => n.tokens));
  nodes.forEach(n => {
    const p = pos.get(n.id), q = byId.has(n.parent) ? pos.get(n.parent) : null;
    if (!p) return;
    const line = document.createElementNS(NS, "line");
    line.setAttribute("x1", q ? q.x + 10 : 0); line.setAttribute("y1", (q ? q.y : p.y) + 12);
    line.setAttribute("x2", p.x + 10); line.setAttribute("y2", p.y + 12);
    line.setAttribute("stroke", n.leaves > 1 ? "#2f7d32" : "#9aa5b8");
    line.setAttribute("stroke-width", 1 + 6 * n.tokens / maxTok);
    svg.appendChild(line);
    const dot = document.createElementNS(NS, "circle");
    dot.setAttribute("cx", p.x + 10); dot.setAttribute("cy", p.y + 12); dot.setAttribute("r", 5);
    dot.setAttribute("fill", n.locks > 0 ? COLORS.locked : (n.shared ? "#f0ad4e" : COLORS.cached_idle));
    const title = document.createElementNS(NS, "title");
    title.textContent = (n.node ? "node " + n.node + ": " : "") + n.tokens + " tokens at depth " + n.depth + ", " + n.hits + " hits, " + n.locks + " locks: " + n.snippet;
    dot.appendChild(title); svg.appendChild(dot);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", p.x + 18); label.setAttribute("y", p.y + 9);
    const where = n.node && !byId.has(n.parent) ? "[" + n.node + "] " : "";  // a cluster node's top entries
    label.textContent = where + (n.leaves > 1 ? "\u00d7" + n.leaves + " " : "") + n.tokens + "t " + (n.snippet || "").replace(/\s+/g, " ").slice(0, 22);
    svg.appendChild(label);
  });
  const box = document.getElementById("tree"); box.replaceChildren(svg);
  if (!nodes.length) box.replaceChildren(el("p", "(empty: no cached prefixes yet)"));
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const [stats, tree, runs] = await Promise.all([get("/v1/cache/stats"), get("/v1/cache/tree?max_nodes=200"), get("/v1/runs")]);
    showStats(stats); showNodes(stats.nodes); showTree(tree);
    fillTable("runs", ["run", "tenant", "status"], (runs.data || []).slice(-12).map(r => [r.id, r.tenant, r.status]));
    status.textContent = "live \u00b7 " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = "1";
  } catch (e) {
    status.textContent = String(e.message || e) + (keyInput.value ? "" : " (enter an API key)");
  }
}
poll();
setInterval(poll, 2000);
</script></body></html>
)HTML";
  return html;
}

}  // namespace arbor::server
