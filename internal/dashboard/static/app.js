// Aegis live dashboard: rows of requests with their verdicts, a latency
// chart, failures by reason, guard devices and recent incidents. Fed by
// server-sent events from /ui/events; no external resources.
"use strict";

const MAX_ROWS = 60, MAX_POINTS = 60, MAX_LATENCIES = 200, MAX_INCIDENTS = 20;
const $ = (id) => document.getElementById(id);
const rows = new Map();   // request_id -> {tr, d}
let latencies = [];       // finished requests: {ttft, dur, added} in ms
let incidents = [];

function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined && text !== null) n.textContent = text;
  return n;
}

function ms(ns) { return ns ? ns / 1e6 : 0; }

function fmtMs(v) {
  if (!v) return "–";
  if (v < 1) return v.toFixed(2) + " ms";
  if (v < 10) return v.toFixed(1) + " ms";
  if (v < 10000) return Math.round(v) + " ms";
  return (v / 1000).toFixed(1) + " s";
}

function fmtTime(t) {
  const d = new Date(t);
  return isNaN(d) ? "" : d.toLocaleTimeString([], { hour12: false });
}

function shortID(id) { return id && id.length > 14 ? id.slice(0, 6) + "…" + id.slice(-6) : id || ""; }

// ---- requests ---------------------------------------------------------

function row(e) {
  let r = rows.get(e.request_id);
  if (r) return r;
  const tr = el("tr", "new");
  tr.dataset.requestId = e.request_id;
  for (let i = 0; i < 8; i++) tr.appendChild(el("td"));
  tr.cells[1].className = "id";
  tr.cells[6].className = tr.cells[7].className = "num";
  r = { tr, d: { time: e.time, attempts: 0, state: "running", reason: "" } };
  rows.set(e.request_id, r);
  $("requests").prepend(tr);
  $("no-requests").hidden = true;
  while (rows.size > MAX_ROWS) {
    const [oldest] = rows.keys();
    rows.get(oldest).tr.remove();
    rows.delete(oldest);
  }
  return r;
}

function renderRow(id, r) {
  const d = r.d, c = r.tr.cells;
  r.tr.dataset.outcome = d.state;
  r.tr.dataset.reason = d.reason || "";
  c[0].textContent = fmtTime(d.time);
  c[1].textContent = shortID(id);
  c[1].title = id;
  c[2].replaceChildren(el("span", null, d.model || "–"), el("small", "via", d.upstream ? " via " + d.upstream : ""));
  c[2].title = (d.model || "–") + " (the model the client asked for)" + (d.upstream ? ", served by upstream " + d.upstream : "");
  c[3].textContent = d.attempts || "";
  const b = el("span", "badge b-" + d.state, d.state);
  c[4].replaceChildren(b);
  // The tool calls of the latest judged attempt, each with its outcome.
  const tools = (d.tools || []).map((t) => t.tool + " (" + t.outcome + ")").join(", ");
  c[5].replaceChildren(el("span", "reason", d.reason || ""), el("small", "tools", tools ? " tools: " + tools : ""));
  c[5].title = (d.reason || "") + (tools ? (d.reason ? "; " : "") + "tool calls: " + tools : "");
  c[6].textContent = fmtMs(d.ttft);
  c[7].textContent = fmtMs(d.dur);
}

function apply(e) {
  if (e.kind === "approval") { loadApprovals(); return; }
  if (e.kind === "guard_status" || (e.kind === "verdict" && e.guard_device)) return;
  if (e.kind === "request_finished" && (e.route || "").startsWith("mcp ")) mcpCount(e);
  const r = row(e), d = r.d;
  d.model = d.model || e.model;
  d.upstream = d.upstream || e.upstream;
  const v = e.verdict;
  switch (e.kind) {
    case "request_started": d.time = e.time; break;
    case "attempt_started": d.attempts = Math.max(d.attempts, e.attempt || 1); break;
    case "verdict":
      if (v && v.verdict === "fail") d.reason = v.reason || "";
      if (e.tool_calls && e.tool_calls.length) d.tools = e.tool_calls;
      break;
    case "retry": d.state = "retrying"; if (v) d.reason = v.reason || ""; break;
    case "halt": d.state = v && v.action === "block" ? "blocked" : v && v.action === "redact" ? "redacted" : "halted"; if (v) d.reason = v.reason || ""; break;
    case "request_finished":
      d.state = e.outcome || "released";
      d.ttft = ms(e.ttft_ns); d.dur = ms(e.duration_ns);
      latencies.push({ ttft: d.ttft, dur: d.dur, added: ms(e.added_ttft_ns) });
      if (latencies.length > MAX_LATENCIES) latencies = latencies.slice(-MAX_LATENCIES);
      scheduleChart();
      break;
  }
  renderRow(e.request_id, r);
}

// ---- totals, reasons, guards -----------------------------------------

function setTotals(t) {
  const o = t.outcomes || {};
  const total = Object.values(o).reduce((a, b) => a + b, 0);
  $("t-total").textContent = total;
  $("t-released").textContent = o.released || 0;
  $("t-repaired").textContent = o.repaired || 0;
  $("t-halted").textContent = o.halted || 0;
  $("t-blocked").textContent = o.blocked || 0;
  $("t-inflight").textContent = t.in_flight || 0;
  const list = $("reasons");
  const entries = Object.entries(t.reasons || {}).sort((a, b) => b[1] - a[1]);
  const top = entries.length ? entries[0][1] : 1;
  list.replaceChildren(...entries.map(([reason, n]) => {
    const li = el("li");
    li.dataset.reason = reason;
    const bar = el("div", "bar");
    bar.style.width = Math.max(2, (100 * n) / top) + "%";
    const track = el("div");
    track.appendChild(bar);
    li.append(el("span", "reason", reason), track, el("span", "n", n));
    return li;
  }));
  $("no-reasons").hidden = entries.length > 0;
}

function setGuards(g) {
  const entries = Object.entries(g || {}).sort();
  $("guards").replaceChildren(...entries.map(([device, s]) => {
    const li = el("li");
    li.dataset.device = device;
    const left = el("span", null, device);
    if (s.child) left.title = s.child;
    const info = [];
    if (s.calls) info.push(s.calls + " calls");
    if (s.last_ns) info.push("last " + fmtMs(ms(s.last_ns)));
    if (s.failures) info.push(s.failures + " failed");
    const right = el("span");
    // A guard without a supervisor (the embedded classifier, a guard_llm
    // server Aegis does not run) reports no state: it answers calls.
    const state = s.state || (s.calls ? "answering" : "unknown");
    right.append(el("span", "reason", info.join(" · ") + "  "), el("span", "state s-" + state, state));
    if (s.fallback) right.append(el("span", "state s-fallback", "serving as fallback"));
    if (s.error) right.title = s.error;
    li.append(left, right);
    return li;
  }));
  $("no-guards").hidden = entries.length > 0;
}

function quantile(xs, q) {
  const v = xs.filter((x) => x > 0).sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.floor(q * v.length))] : 0;
}

// ---- chart --------------------------------------------------------------

let chartPending = false;
function scheduleChart() {
  if (chartPending) return;
  chartPending = true;
  requestAnimationFrame(() => { chartPending = false; drawChart(); });
}

function drawChart() {
  $("t-ttft").textContent = fmtMs(quantile(latencies.map((p) => p.ttft), 0.5));
  $("t-added").textContent = fmtMs(quantile(latencies.map((p) => p.added), 0.95));
  const svg = $("chart"), W = 480, H = 190, L = 46, R = 8, T = 8, B = 18;
  const pts = latencies.slice(-MAX_POINTS);
  const all = pts.flatMap((p) => [p.ttft, p.dur, p.added]).filter((x) => x > 0);
  let lo = Math.floor(Math.log10(Math.min(...all, 1))), hi = Math.ceil(Math.log10(Math.max(...all, 10)));
  if (hi - lo < 2) lo = hi - 2;
  const y = (v) => T + (H - T - B) * (1 - (Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo));
  const x = (i) => L + (W - L - R) * (pts.length > 1 ? i / (pts.length - 1) : 0.5);
  const ns = "http://www.w3.org/2000/svg", parts = [];
  const mk = (tag, attrs, text) => {
    const n = document.createElementNS(ns, tag);
    for (const k in attrs) n.setAttribute(k, attrs[k]);
    if (text) n.textContent = text;
    parts.push(n);
  };
  for (let p = lo; p <= hi; p++) {
    const v = 10 ** p;
    mk("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" });
    mk("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end" }, v >= 1000 ? v / 1000 + " s" : v + " ms");
  }
  mk("text", { x: L, y: H - 4 }, pts.length ? "older" : "no finished requests yet");
  if (pts.length) mk("text", { x: W - R, y: H - 4, "text-anchor": "end" }, "newest");
  for (const [key, cls] of [["dur", "dur"], ["ttft", "ttft"], ["added", "added"]]) {
    const xy = pts.map((p, i) => (p[key] > 0 ? [x(i).toFixed(1), y(p[key]).toFixed(1)] : null)).filter(Boolean);
    if (xy.length > 1) mk("polyline", { points: xy.map((p) => p.join(",")).join(" "), class: cls });
    if (xy.length <= 30) for (const [cx, cy] of xy) mk("circle", { cx, cy, r: 2.5, class: "dot " + cls });
  }
  svg.replaceChildren(...parts);
}

// ---- incidents ----------------------------------------------------------

// incidentWord names an incident's kind with the request outcomes' words.
function incidentWord(kind) {
  return { halt: "halted", block: "blocked", retry: "retried", redact: "redacted" }[kind] || kind;
}

function incidentNode(inc) {
  const box = el("div", "incident");
  box.dataset.incidentId = inc.id;
  box.dataset.reason = inc.reason || "";
  const meta = el("div", "meta");
  meta.append(
    el("span", "badge b-" + incidentWord(inc.kind), incidentWord(inc.kind)),
    el("strong", null, "#" + inc.id + " " + (inc.reason || "")),
    el("span", "reason", "→ " + inc.action + " · risk " + inc.risk),
    el("span", "req", (inc.model || "–") + (inc.upstream ? " via " + inc.upstream : "")),
    el("span", "req", "request " + shortID(inc.request_id) + (inc.attempt ? ", attempt " + inc.attempt : "")),
  );
  if (inc.gateway) meta.append(el("span", "req", "gateway " + inc.gateway));
  meta.append(el("span", "when", fmtTime(inc.time)));
  box.appendChild(meta);
  const findings = inc.findings || [];
  if (findings.length) {
    const ol = el("ol");
    for (const f of findings) {
      const where = f.end > f.start + 1 ? "bytes " + f.start + "–" + f.end : "byte " + f.start;
      const at = f.path ? " at " + f.path : ""; // a tool call's argument: tool_calls/0/arguments/body
      ol.appendChild(el("li", null, (f.check || "check") + ": " + (f.message || f.reason) + " (" + where + at + ")"));
    }
    box.appendChild(ol);
  }
  if (inc.has_text) {
    const pre = el("pre");
    for (const s of inc.segments || []) {
      if (s.findings && s.findings.length) {
        const m = el("mark", null, s.text);
        m.title = s.findings.map((i) => findings[i] && findings[i].message).filter(Boolean).join("; ");
        pre.appendChild(m);
      } else pre.appendChild(document.createTextNode(s.text));
    }
    box.appendChild(pre);
  } else {
    const p = el("p", "notext", "no output text recorded");
    p.title = "Output text is kept only when the policy sets log_text: true; the findings give byte offsets.";
    box.appendChild(p);
  }
  return box;
}

// addIncidents merges incidents by id, newest first: a fetch answered late
// must not drop those that arrived live meanwhile.
function addIncidents(list) {
  const byID = new Map(incidents.map((i) => [i.id, i]));
  for (const i of list) byID.set(i.id, i);
  incidents = [...byID.values()].sort((a, b) => b.id - a.id).slice(0, MAX_INCIDENTS);
  renderIncidents();
}

function renderIncidents() {
  $("incidents").replaceChildren(...incidents.map(incidentNode));
  $("no-incidents").hidden = incidents.length > 0;
}

// loadIncidents lists this gateway's incidents (several gateways may share
// one incident log), or every gateway's when "all gateways" is ticked.
async function loadIncidents() {
  try {
    const all = $("all-gateways").checked;
    const r = await fetch("api/incidents?limit=" + MAX_INCIDENTS + (all ? "&gateway=*" : ""));
    if (!r.ok) return;
    const body = await r.json();
    if (body.gateway) $("incidents-gateway").textContent = "· " + (all ? "all gateways" : "gateway " + body.gateway);
    addIncidents(body.incidents || []);
  } catch (_) { /* retried on the next snapshot */ }
}

// ---- stream -------------------------------------------------------------

function connect() {
  const src = new EventSource("events");
  const conn = $("conn");
  src.onopen = () => { conn.textContent = "live"; conn.className = "pill on"; };
  src.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "pill off"; };
  src.addEventListener("snapshot", (m) => {
    const s = JSON.parse(m.data);
    rows.clear();
    mcpTools.clear();
    $("requests").replaceChildren();
    latencies = [];
    for (const e of s.events || []) apply(e);
    for (const r of rows.values()) r.tr.classList.remove("new");
    setTotals(s.totals || {});
    setGuards(s.guards);
    scheduleChart();
    loadIncidents();
    loadApprovals();
  });
  src.addEventListener("event", (m) => apply(JSON.parse(m.data)));
  src.addEventListener("totals", (m) => setTotals(JSON.parse(m.data)));
  src.addEventListener("guards", (m) => setGuards(JSON.parse(m.data)));
  src.addEventListener("approvals", () => loadApprovals()); // another gateway of the fleet held or ended a call
  src.addEventListener("incident", (m) => {
    addIncidents([JSON.parse(m.data)]);
  });
}

// ---- fleet (serve --nats) -------------------------------------------------

function fleetCells(tr, values) {
  for (const [v, num] of values) {
    const td = document.createElement("td");
    td.textContent = v;
    if (num) td.className = "num";
    tr.append(td);
  }
  return tr;
}

function fleetOutcomes(t) {
  return Object.entries((t && t.outcomes) || {}).sort().map(([k, n]) => k + " " + n).join(", ");
}

function fleetMs(ns) { return ns ? (ns / 1e6).toFixed(1) + " ms" : "–"; }

async function loadFleet() {
  try {
    const r = await fetch("api/fleet");
    if (!r.ok) return true;
    const f = await r.json();
    if (f.enabled === false) return false; // not in a fleet: stop asking
    const gws = (f.members || []).filter((m) => m.role === "gateway");
    const workers = (f.members || []).filter((m) => m.role === "guard-worker");
    const fleetRow = (id, host, t) => fleetCells(document.createElement("tr"), [[id], [host], [t.requests || 0, 1],
      [t.in_flight || 0, 1], [t.retries || 0, 1], [t.halts || 0, 1], [fleetOutcomes(t)]]);
    const rowsG = gws.map((m) => fleetRow(m.id, m.host, m.totals || {}));
    if (gws.length > 1) rowsG.push(fleetRow("total", "", f.total || {}));
    $("fleet-gateways").replaceChildren(...rowsG);
    $("fleet-workers").replaceChildren(...workers.map((m) => fleetCells(document.createElement("tr"),
      [[m.id], [m.model], [m.device || "–"], [m.calls || 0, 1], [fleetMs(m.verdict_p50_ns), 1], [fleetMs(m.verdict_p99_ns), 1]])));
    $("fleet").hidden = false;
  } catch (_) { /* retried */ }
  return true;
}

async function pollFleet() {
  if (await loadFleet()) setTimeout(pollFleet, 2000);
}

$("all-gateways").addEventListener("change", () => { incidents = []; renderIncidents(); loadIncidents(); });
drawChart();
connect();
pollFleet();

// ---- MCP tools: calls and listings through aegis mcp, per server and tool ----

const mcpTools = new Map(); // "server\u0000tool" → {server, tool, lists, calls, outcomes}

function mcpCount(e) {
  const key = (e.upstream || "") + "\u0000" + (e.model || "");
  let t = mcpTools.get(key);
  if (!t) { t = { server: e.upstream || "", tool: e.model || "", flagged: 0, calls: 0, outcomes: {} }; mcpTools.set(key, t); }
  if (e.route === "mcp tools/list") t.flagged++;
  else { t.calls++; t.outcomes[e.outcome] = (t.outcomes[e.outcome] || 0) + 1; }
  renderMCP();
}

function renderMCP() {
  const tb = $("mcp-tools");
  $("mcp").hidden = mcpTools.size === 0;
  const list = [...mcpTools.values()].sort((a, b) => a.server.localeCompare(b.server) || a.tool.localeCompare(b.tool));
  tb.replaceChildren(...list.map((t) => {
    const tr = el("tr");
    const outcomes = Object.entries(t.outcomes).map(([k, v]) => k + " " + v).join(", ");
    for (const v of [t.server, t.tool, String(t.calls), outcomes || "–", t.flagged ? "flagged " + t.flagged + "×" : ""]) tr.append(el("td", null, v));
    tr.children[2].className = "num";
    tr.lastChild.className = t.flagged ? "reason" : "";
    return tr;
  }));
}

// ---- configuration (reloads) ------------------------------------------------

async function loadConfig() {
  try {
    const r = await fetch("api/config");
    if (!r.ok) return true;
    const c = await r.json();
    if (c.enabled === false) return false;
    $("config-state").textContent = "policy " + c.policy + " · loaded " + new Date(c.loaded_at).toLocaleTimeString() +
      " · " + c.reloads + " reload" + (c.reloads === 1 ? "" : "s") + ", " + c.failures + " refused";
    const e = $("config-error");
    e.hidden = !c.last_error;
    e.textContent = c.last_error ? "refused at " + new Date(c.failed_at).toLocaleTimeString() + ": " + c.last_error : "";
    $("config").hidden = false;
  } catch (_) { /* retried */ }
  return true;
}

async function pollConfig() {
  if (await loadConfig()) setTimeout(pollConfig, 5000);
}

pollConfig();

// ---- approvals (action: approve) ------------------------------------------

async function loadApprovals() {
  try {
    const r = await fetch("api/approvals");
    if (!r.ok) return;
    const body = await r.json();
    $("approvals-panel").hidden = !body.enabled;
    renderApprovals(body.approvals || []);
  } catch (_) { /* retried on the next approval event */ }
}

function renderApprovals(list) {
  const tb = $("approvals");
  tb.replaceChildren();
  $("no-approvals").hidden = list.length > 0;
  for (const a of list) {
    const tr = el("tr");
    tr.dataset.approvalId = a.id;
    const calls = (a.calls || []).map((c) => c.tool + "(" + (c.paths || []).join(", ") + ")").join(", ");
    const req = shortID(a.request_id) + (a.gateway ? " on " + a.gateway : "");
    for (const [v, cls] of [[fmtTime(a.time), ""], [req, "mono"], [calls, "calls"], [a.reason || "", ""], [a.rule || "", "rule"], [fmtTime(a.deadline), ""]]) {
      tr.append(el("td", cls, v));
    }
    const td = el("td", "decide");
    const ok = el("button", "approve", "Approve"), no = el("button", "deny", "Deny");
    ok.addEventListener("click", () => decide(a, "approve"));
    no.addEventListener("click", () => decide(a, "deny"));
    td.append(ok, no);
    tr.append(td);
    tb.append(tr);
  }
}

async function decide(a, what) {
  const r = await fetch("api/approvals/" + encodeURIComponent(a.id) + "/" + what, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ args_hash: a.args_hash, policy_version: a.policy_version }),
  });
  if (!r.ok) {
    const tr = document.querySelector('tr[data-approval-id="' + a.id + '"]');
    if (tr) tr.title = (await r.json().catch(() => ({}))).error || r.statusText;
  }
  loadApprovals();
}
