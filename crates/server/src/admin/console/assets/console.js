// Warden's web console: vanilla JS over /console/api. Every text that comes from the server
// (node names, data, ACL ids) is put in the page as text, never as HTML.
"use strict";

const API = "/console/api/";
const POLL_MS = 1000;
const HISTORY_POINTS = 120;

const state = {
  credentials: null, // "user:password" while signed in
  path: "/",
  after: null, // the last child name shown, for the next page
  node: null, // the last /node answer
  view: null, // text | json | hex
  live: [], // the last HISTORY_POINTS /live answers, with the time they came
};

const $ = (id) => document.getElementById(id);

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c);
    else td.textContent = c === null || c === undefined ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}

function headers() {
  return state.credentials ? { Authorization: "digest " + state.credentials } : {};
}

async function api(path, params, init) {
  const query = new URLSearchParams(params || {}).toString();
  const response = await fetch(API + path + (query ? "?" + query : ""), {
    ...(init || {}),
    headers: { ...headers(), ...((init && init.headers) || {}) },
  });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) {
    const error = new Error(body.error || response.statusText);
    error.status = response.status;
    throw error;
  }
  return body;
}

function status(text, isError) {
  const footer = $("status");
  footer.textContent = text;
  footer.className = isError ? "error" : "muted";
}

// ---- tabs

function showTab(name) {
  for (const b of document.querySelectorAll("#tabs button")) {
    b.classList.toggle("active", b.dataset.tab === name);
  }
  for (const s of document.querySelectorAll("main > section")) {
    s.hidden = s.id !== "tab-" + name;
  }
  if (name === "sessions") loadSessions();
  if (name === "cluster") loadCluster();
  if (name === "live") drawCharts();
}

// ---- the tree

function childPath(parent, name) {
  return parent === "/" ? "/" + name : parent + "/" + name;
}

// The location's hash names the node shown (#/app/config), each name URI-encoded.
function hashOf(path) {
  return "#" + path.split("/").map(encodeURIComponent).join("/");
}

function pathOfHash() {
  try {
    return location.hash.slice(1).split("/").map(decodeURIComponent).join("/") || "/";
  } catch {
    return "/";
  }
}

function go(path) {
  if (location.hash !== hashOf(path)) location.hash = hashOf(path);
  else openPath(path);
}

function openPath(path) {
  state.path = path;
  state.after = null;
  state.view = null;
  status("");
  $("children").tBodies[0].replaceChildren();
  $("biggest").replaceChildren();
  renderBreadcrumb(path);
  loadChildren();
  loadNode(path);
}

function renderBreadcrumb(path) {
  const crumbs = $("breadcrumb");
  crumbs.replaceChildren();
  const root = el("a", "/");
  root.onclick = () => go("/");
  crumbs.appendChild(root);
  let at = "";
  for (const name of path.split("/").filter(Boolean)) {
    at += "/" + name;
    const target = at;
    const a = el("a", name);
    a.onclick = () => go(target);
    if (crumbs.childNodes.length > 1) crumbs.appendChild(document.createTextNode("/"));
    crumbs.appendChild(a);
  }
}

async function loadChildren() {
  const path = state.path;
  const params = { path, limit: 100 };
  if (state.after !== null) params.after = state.after;
  try {
    const page = await api("children", params);
    if (state.path !== path) return; // the operator went elsewhere meanwhile
    const body = $("children").tBodies[0];
    for (const c of page.children) {
      const a = el("a", c.name, { "data-path": childPath(page.path, c.name) });
      a.onclick = () => go(childPath(page.path, c.name));
      const stat = c.stat || {};
      body.appendChild(
        row([a, c.numChildren, stat.dataLength ?? "?", stat.version ?? "?"]),
      );
    }
    state.after = page.next;
    $("children-more").hidden = page.next === null;
    $("children-summary").textContent =
      page.total + (page.total === 1 ? " child" : " children") +
      (body.rows.length < page.total ? ", " + body.rows.length + " shown" : "");
  } catch (e) {
    if (state.path !== path) return;
    $("children-summary").textContent = "";
    status("children of " + state.path + ": " + e.message, true);
  }
}

async function loadNode(path) {
  $("node-path").textContent = path;
  $("node-error").hidden = true;
  try {
    const node = await api("node", { path });
    if (state.path !== path) return;
    state.node = node;
    renderNode();
  } catch (e) {
    if (state.path !== path) return;
    state.node = null;
    $("node-error").textContent = e.message;
    $("node-error").hidden = false;
    $("node-data").textContent = "";
    $("node-stat").replaceChildren();
    $("node-acl").replaceChildren();
  }
}

function bytesOf(node) {
  if (node.data === null) return null;
  const raw = atob(node.data);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function asText(bytes) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

function asJson(text) {
  if (text === null) return null;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}

function hexDump(bytes) {
  const lines = [];
  for (let at = 0; at < bytes.length; at += 16) {
    const chunk = bytes.subarray(at, at + 16);
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(at.toString(16).padStart(8, "0") + "  " + hex.padEnd(48) + "  " + ascii);
  }
  return lines.join("\n");
}

function renderNode() {
  const node = state.node;
  const bytes = bytesOf(node);
  const text = bytes === null ? null : asText(bytes);
  const json = asJson(text);
  if (!state.view) state.view = json !== null ? "json" : text !== null ? "text" : "hex";
  for (const b of document.querySelectorAll(".views button")) {
    b.classList.toggle("active", b.dataset.view === state.view);
  }
  let shown;
  if (bytes === null) shown = "(null data)";
  else if (state.view === "json") shown = json !== null ? json : "(not JSON)";
  else if (state.view === "text") shown = text !== null ? text : "(not UTF-8 text: see hex)";
  else shown = hexDump(bytes);
  $("node-data").textContent = shown;
  $("node-data-note").textContent =
    node.stat.dataLength + " bytes" + (node.truncated ? " (the first " + bytes.length + " shown)" : "");
  const stat = $("node-stat");
  stat.replaceChildren();
  for (const [k, v] of Object.entries(node.stat)) {
    const shownValue = k.endsWith("time") && v > 0 ? v + " (" + new Date(v).toISOString() + ")" : v;
    stat.appendChild(row([k, shownValue]));
  }
  const acl = $("node-acl");
  acl.replaceChildren();
  if (Array.isArray(node.acl)) {
    for (const a of node.acl) acl.appendChild(row([a.scheme + ":" + a.id, a.perms]));
  } else {
    acl.appendChild(row([node.acl]));
  }
  $("set-data").value = text !== null && bytes !== null ? text : "";
  $("set-version").value = node.stat.version;
  $("delete-version").value = node.stat.version;
}

async function loadBiggest() {
  const out = $("biggest");
  out.replaceChildren(el("span", "measuring…", { class: "muted" }));
  try {
    const b = await api("biggest", { path: state.path, limit: 10 });
    const table = (title, list) => {
      const t = el("table");
      t.appendChild(row([el("b", title), el("b", "znodes"), el("b", "bytes")]));
      for (const s of list) {
        const a = el("a", s.path);
        a.onclick = () => go(s.path);
        t.appendChild(row([a, s.nodes, s.bytes]));
      }
      return t;
    };
    out.replaceChildren(
      table("by znodes", b.by_nodes),
      table("by bytes", b.by_bytes),
      el("div", b.complete
        ? b.scanned + " znodes measured"
        : "stopped after " + b.scanned + " znodes (the bound): the figures are lower bounds",
        { class: "muted" }),
    );
  } catch (e) {
    out.replaceChildren(el("span", e.message, { class: "error" }));
  }
}

async function search(prefix) {
  const out = $("search-results");
  out.hidden = false;
  out.replaceChildren(el("span", "searching…", { class: "muted" }));
  try {
    const r = await api("search", { prefix, limit: 50 });
    const list = el("ul", null, { class: "paths" });
    for (const p of r.paths) {
      const li = el("li");
      const a = el("a", p);
      a.onclick = () => go(p);
      li.appendChild(a);
      list.appendChild(li);
    }
    out.replaceChildren(
      el("div", r.paths.length + " found" + (r.complete ? "" : " (stopped at the bound: there may be more)"), { class: "muted" }),
      list,
    );
  } catch (e) {
    out.replaceChildren(el("span", e.message, { class: "error" }));
  }
}

// ---- writes

async function write(op, params, data) {
  const result = $("write-result");
  try {
    const r = await api(op, params, { method: "POST", body: data ?? "" });
    result.className = "ok";
    result.textContent = op + " " + r.path + ": done (zxid " + r.zxid + ")";
    return r;
  } catch (e) {
    result.className = "error";
    result.textContent = op + " failed: " + e.message;
    return null;
  }
}

function setupWrites() {
  $("write-set").onsubmit = async (ev) => {
    ev.preventDefault();
    if (await write("set", { path: state.path, version: $("set-version").value }, $("set-data").value)) {
      loadNode(state.path);
    }
  };
  $("write-create").onsubmit = async (ev) => {
    ev.preventDefault();
    const name = $("create-name").value.trim();
    if (!name) return;
    const params = { path: childPath(state.path, name) };
    if ($("create-sequential").checked) params.sequential = "true";
    if (await write("create", params, $("create-data").value)) openPath(state.path);
  };
  $("write-delete").onsubmit = async (ev) => {
    ev.preventDefault();
    const path = state.path;
    if (path === "/") return;
    if (await write("delete", { path, version: $("delete-version").value })) {
      go(path.substring(0, path.lastIndexOf("/")) || "/");
    }
  };
}

// ---- signing in

async function signIn(user, password) {
  state.credentials = user + ":" + password;
  try {
    const who = await api("whoami");
    for (const e of document.querySelectorAll(".who-name, #who-name")) e.textContent = user;
    $("login").hidden = true;
    $("who").hidden = false;
    $("writes").hidden = !who.can_write;
    $("read-only-note").hidden = who.can_write;
    openPath(state.path);
  } catch (e) {
    state.credentials = null;
    status("sign in: " + e.message, true);
  }
}

function signOut() {
  state.credentials = null;
  $("login").hidden = false;
  $("who").hidden = true;
  $("writes").hidden = true;
  $("read-only-note").hidden = false;
  openPath(state.path);
}

// ---- sessions and cluster

async function loadSessions() {
  try {
    const s = await api("sessions", { limit: 200 });
    $("sessions-summary").textContent =
      s.total + " sessions" + (s.sessions.length < s.total ? ", the first " + s.sessions.length + " shown" : "");
    const body = $("sessions").tBodies[0];
    body.replaceChildren();
    const paths = (p) => {
      const ul = el("ul", null, { class: "paths" });
      for (const path of p.paths) ul.appendChild(el("li", path));
      if (p.total > p.paths.length) ul.appendChild(el("li", "… " + (p.total - p.paths.length) + " more"));
      return ul;
    };
    for (const x of s.sessions) {
      const conn = x.connection ? x.connection.peer + " (last " + x.connection.last_operation + ")" : "elsewhere";
      const expires = x.expires_at_ms === null ? "" : "in " + Math.max(0, x.expires_at_ms - s.uptime_ms) + " ms";
      body.appendChild(row([x.id, x.timeout_ms + " ms", conn, expires, paths(x.ephemerals), paths(x.watches)]));
    }
  } catch (e) {
    status("sessions: " + e.message, true);
  }
}

async function loadCluster() {
  try {
    const c = await api("cluster");
    const me = $("cluster-me");
    me.replaceChildren();
    for (const [k, v] of [
      ["this server", c.me + " (" + c.mode + ")"],
      ["serving clients", c.serving ? "yes" : "no: no quorum"],
      ["leader", c.leader ?? "none"],
      ["term", c.term],
      ["zxid", c.zxid_hex],
      ["last log index", c.last_log_index],
      ["committed (cluster)", c.cluster_committed_index],
      ["applied", c.applied_index],
      ["applied lag (entries)", c.applied_lag_entries],
      ["snapshot index", c.snapshot_index],
    ]) me.appendChild(row([k, v]));
    $("cluster-note").textContent = c.leader_view || c.standalone
      ? ""
      : "The log index each member holds is known to the leader (server " + (c.leader ?? "?") + "): its console shows it.";
    const body = $("members").tBodies[0];
    body.replaceChildren();
    for (const m of c.members) {
      body.appendChild(row([
        m.id + (m.me ? " (this one)" : ""), m.role, m.client_address, m.peer_address,
        m.matched_index, m.lag_entries, m.synced ? "yes" : "no",
      ]));
    }
  } catch (e) {
    status("cluster: " + e.message, true);
  }
}

// ---- live charts

async function poll() {
  try {
    const l = await api("live");
    l.at = Date.now();
    state.live.push(l);
    if (state.live.length > HISTORY_POINTS) state.live.shift();
    const badge = $("server-mode");
    badge.textContent = l.mode + (l.serving ? "" : " (not serving: no quorum)") + " · " +
      l.znodes + " znodes · " + l.sessions + " sessions";
    if (!$("tab-live").hidden) drawCharts();
  } catch (e) {
    status("live: " + e.message, true);
  }
}

// Per-second series from consecutive answers.
function series() {
  const out = { throughput: [], latency: [], memory: [] };
  for (let i = 1; i < state.live.length; i++) {
    const a = state.live[i - 1];
    const b = state.live[i];
    const seconds = Math.max((b.at - a.at) / 1000, 0.001);
    out.throughput.push(Math.max(0, b.packets_received - a.packets_received) / seconds);
    // srst resets the counters: a difference below zero is no figure.
    const count = b.latency_count - a.latency_count;
    const totalUs = b.latency_total_us - a.latency_total_us;
    out.latency.push(count > 0 && totalUs >= 0 ? totalUs / count / 1000 : 0);
    out.memory.push((b.resident_bytes || 0) / (1024 * 1024));
  }
  return out;
}

function drawChart(canvas, values, unit, color) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width;
  const h = canvas.height;
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, w, h);
  ctx.strokeStyle = "#e4e8ee";
  ctx.lineWidth = 1;
  for (let y = 0; y <= 4; y++) {
    ctx.beginPath();
    ctx.moveTo(40, 10 + (y * (h - 30)) / 4);
    ctx.lineTo(w - 5, 10 + (y * (h - 30)) / 4);
    ctx.stroke();
  }
  const max = Math.max(1e-9, ...values) * 1.1;
  ctx.fillStyle = "#66707d";
  ctx.font = "11px sans-serif";
  ctx.fillText(format(max) + " " + unit, 2, 12);
  ctx.fillText("0", 2, h - 20);
  ctx.fillText(HISTORY_POINTS / (1000 / POLL_MS) + " s ago", 40, h - 4);
  ctx.fillText("now", w - 28, h - 4);
  if (values.length < 2) {
    ctx.fillText("gathering…", w / 2 - 30, h / 2);
    return;
  }
  const x = (i) => 40 + ((w - 45) * (i + HISTORY_POINTS - values.length)) / (HISTORY_POINTS - 1);
  const y = (v) => 10 + (h - 30) * (1 - v / max);
  ctx.strokeStyle = color;
  ctx.lineWidth = 2;
  ctx.beginPath();
  values.forEach((v, i) => (i === 0 ? ctx.moveTo(x(i), y(v)) : ctx.lineTo(x(i), y(v))));
  ctx.stroke();
}

function format(v) {
  return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(3);
}

function drawCharts() {
  const s = series();
  const last = (list) => (list.length ? list[list.length - 1] : 0);
  drawChart($("chart-throughput"), s.throughput, "req/s", "#e63946");
  drawChart($("chart-latency"), s.latency, "ms", "#457b9d");
  drawChart($("chart-memory"), s.memory, "MiB", "#2a9d8f");
  $("live-throughput").textContent = format(last(s.throughput)) + " requests/s";
  $("live-latency").textContent = format(last(s.latency)) + " ms average over the last second";
  $("live-memory").textContent = format(last(s.memory)) + " MiB resident";
  const l = state.live[state.live.length - 1];
  if (!l) return;
  const figures = $("live-figures");
  figures.replaceChildren();
  for (const [k, v] of [
    ["latency min / avg / max (since start)", l.latency_ms.min + " / " + l.latency_ms.avg.toFixed(3) + " / " + l.latency_ms.max + " ms"],
    ["reads p50 / p99", (l.reads.p50_ms ?? "–") + " / " + (l.reads.p99_ms ?? "–") + " ms"],
    ["writes p50 / p99", (l.writes.p50_ms ?? "–") + " / " + (l.writes.p99_ms ?? "–") + " ms"],
    ["commits", l.commits],
    ["connections / outstanding", l.connections + " / " + l.outstanding],
    ["watches", l.watches],
    ["zxid", "0x" + l.zxid.toString(16)],
  ]) figures.appendChild(row([k, v]));
}

// ---- start

function start() {
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => showTab(b.dataset.tab);
  for (const b of document.querySelectorAll(".views button")) {
    b.onclick = () => {
      state.view = b.dataset.view;
      if (state.node) renderNode();
    };
  }
  $("children-more").onclick = loadChildren;
  $("biggest-load").onclick = loadBiggest;
  $("search").onsubmit = (ev) => {
    ev.preventDefault();
    search($("search-prefix").value.trim());
  };
  $("login").onsubmit = (ev) => {
    ev.preventDefault();
    signIn($("login-user").value, $("login-password").value);
  };
  $("logout").onclick = signOut;
  setupWrites();
  window.addEventListener("hashchange", () => openPath(pathOfHash()));
  openPath(pathOfHash());
  poll();
  setInterval(poll, POLL_MS);
}

start();
