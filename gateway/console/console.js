// The Floe console: a page over the agent's HTTP API. Tenants sign in with an API key and see
// their topics, consumer groups and records; the operator signs in with the operator token and
// sees agents, metadata nodes, tenants, quotas and usage. Every request carries the key as a
// bearer token, so the server decides what each one may see. Text from the cluster (names,
// records) is only ever put into the page as text nodes, never as HTML.
"use strict";

const session = {
  get token() { return sessionStorage.getItem("floe.token") || ""; },
  get role() { return sessionStorage.getItem("floe.role") || ""; },
  set(token, role) { sessionStorage.setItem("floe.token", token); sessionStorage.setItem("floe.role", role); },
  clear() { for (const k of ["floe.token", "floe.role", "floe.open"]) sessionStorage.removeItem(k); },
  // Signed in without a key, on a server that asks for none.
  get open() { return sessionStorage.getItem("floe.open") === "1"; },
};

// Series sampled while the console is open, by name: [[time ms, value], ...], last 10 minutes.
const samples = new Map();
const SAMPLE_KEEP_MS = 10 * 60 * 1000;
let refreshTimer = null;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const text = await response.text();
  let body = {};
  try { body = text ? JSON.parse(text) : {}; } catch { body = { message: text }; }
  if (!response.ok) {
    const error = new Error(body.message || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

let clusterId = null;
async function cluster() {
  if (!clusterId) {
    const clusters = await api("/v3/clusters");
    clusterId = clusters.data[0].cluster_id;
  }
  return `/v3/clusters/${encodeURIComponent(clusterId)}`;
}

function record(name, value) {
  const now = Date.now();
  const points = samples.get(name) || [];
  points.push([now, value]);
  while (points.length && points[0][0] < now - SAMPLE_KEEP_MS) points.shift();
  samples.set(name, points);
  return points;
}

// Per-second rate of a counter between its last two samples.
function rate(name) {
  const points = samples.get(name) || [];
  if (points.length < 2) return null;
  const [[t0, v0], [t1, v1]] = points.slice(-2);
  return t1 > t0 ? Math.max(0, (v1 - v0) * 1000 / (t1 - t0)) : null;
}

function rates(name) {
  const points = samples.get(name) || [];
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const [t0, v0] = points[i - 1], [t1, v1] = points[i];
    if (t1 > t0) out.push([t1, Math.max(0, (v1 - v0) * 1000 / (t1 - t0))]);
  }
  return out;
}

function number(n) {
  if (n === null || n === undefined) return "–";
  return Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 });
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toLocaleString("en-US", { maximumFractionDigits: 1 })} ${units[i]}`;
}

const COLORS = ["#0a58ca", "#b42318", "#1a7f37", "#8250df", "#bf8700", "#0e7490"];

// A line chart of series [{name, points: [[t, v], ...]}], as an SVG with a text description.
function lineChart(title, series, unit) {
  const w = 640, hgt = 180, pad = 36;
  const all = series.flatMap((x) => x.points);
  const figure = h("figure", { class: "chart" });
  const last = series.map((x) => `${x.name}: ${x.points.length ? number(x.points[x.points.length - 1][1]) : "–"} ${unit}`);
  const svg = s("svg", { width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, role: "img",
    "aria-label": `${title}. Latest: ${last.join(", ")}` });
  svg.append(s("title", {}, title));
  if (all.length >= 1) {
    const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
    const vmax = Math.max(...all.map((p) => p[1]), 1e-9);
    const x = (t) => pad + (t - t0) / (t1 - t0) * (w - 2 * pad);
    const y = (v) => hgt - pad + 10 - v / vmax * (hgt - pad - 10);
    svg.append(s("line", { x1: pad, y1: hgt - pad + 10, x2: w - pad, y2: hgt - pad + 10, stroke: "#d0d7de" }));
    svg.append(s("text", { x: 2, y: 14, "font-size": 11, fill: "#57606a" }, `${number(vmax)} ${unit}`));
    svg.append(s("text", { x: 2, y: hgt - pad + 10, "font-size": 11, fill: "#57606a" }, "0"));
    svg.append(s("text", { x: pad, y: hgt - 6, "font-size": 11, fill: "#57606a" }, new Date(t0).toLocaleTimeString()));
    svg.append(s("text", { x: w - pad - 60, y: hgt - 6, "font-size": 11, fill: "#57606a" }, new Date(t1).toLocaleTimeString()));
    series.forEach((line, i) => {
      if (!line.points.length) return;
      const d = line.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
      svg.append(s("polyline", { points: d, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2 }));
    });
  } else {
    svg.append(s("text", { x: pad, y: hgt / 2, fill: "#57606a" }, "Sampling: the chart fills while this page is open."));
  }
  figure.append(svg);
  const legend = h("figcaption", { class: "legend" }, h("strong", {}, title), " ",
    series.map((x, i) => h("span", { style: `color:${COLORS[i % COLORS.length]}` }, `■ ${x.name}`)));
  figure.append(legend);
  return figure;
}

function table(caption, columns, rows) {
  return h("table", {},
    h("caption", { class: "help" }, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows.length
      ? rows.map((r) => h("tr", {}, columns.map((c, i) => h("td", { class: c.num ? "num" : null }, r[i]))))
      : h("tr", {}, h("td", { colspan: columns.length }, "None."))));
}

function link(hash, text) {
  return h("a", { href: hash }, text);
}

function setStatus(text, isError) {
  const el = document.getElementById("status");
  el.textContent = text || "";
  el.className = isError ? "error" : "";
}

// ---------------------------------------------------------------- tenant views

async function topicsView(view) {
  const base = await cluster();
  const topics = (await api(`${base}/topics`)).data.slice(0, 200);
  const rows = await Promise.all(topics.map(async (t) => {
    const name = t.topic_name;
    const partitions = (await api(`${base}/topics/${encodeURIComponent(name)}/partitions`)).data;
    const end = partitions.reduce((n, p) => n + p.high_watermark, 0);
    record(`topic:${name}`, end);
    const size = partitions.reduce((n, p) => n + p.size_bytes, 0);
    let retention = "–";
    try {
      const configs = (await api(`${base}/topics/${encodeURIComponent(name)}/configs`)).data;
      const r = configs.find((c) => c.name === "retention.ms");
      if (r) retention = r.value === "-1" ? "forever" : `${number(r.value / 3600000)} h`;
    } catch { /* configs need DescribeConfigs; shown as unknown */ }
    return [link(`#/topics/${encodeURIComponent(name)}`, name), number(t.partitions_count), number(end),
      bytes(size), retention, rate(`topic:${name}`) === null ? "…" : number(rate(`topic:${name}`))];
  }));
  view.append(h("h2", {}, "Topics"),
    table("Your topics. Throughput is sampled every 5 seconds while this page is open.", [
      { label: "Topic" }, { label: "Partitions", num: true }, { label: "Records (log end)", num: true },
      { label: "Stored", num: true }, { label: "Retention" }, { label: "Records/s", num: true },
    ], rows),
    lineChart("Records produced per second", topics.map((t) => ({ name: t.topic_name, points: rates(`topic:${t.topic_name}`) })), "records/s"));
}

async function topicView(view, name) {
  const base = await cluster();
  const path = `${base}/topics/${encodeURIComponent(name)}`;
  const partitions = (await api(`${path}/partitions`)).data;
  record(`topic:${name}`, partitions.reduce((n, p) => n + p.high_watermark, 0));
  let configs = [];
  try { configs = (await api(`${path}/configs`)).data; } catch { /* as above */ }
  view.append(h("h2", {}, `Topic ${name}`),
    h("p", {}, link(`#/records/${encodeURIComponent(name)}`, "Browse its records")),
    lineChart("Records produced per second", [{ name, points: rates(`topic:${name}`) }], "records/s"),
    table("Partitions", [
      { label: "Partition", num: true }, { label: "Log start", num: true }, { label: "High watermark", num: true },
      { label: "Last stable", num: true }, { label: "Stored", num: true },
    ], partitions.map((p) => [p.partition_id, number(p.log_start_offset), number(p.high_watermark),
      number(p.last_stable_offset), bytes(p.size_bytes)])),
    table("Configuration", [{ label: "Name" }, { label: "Value" }, { label: "Default" }],
      configs.map((c) => [c.name, c.value === null ? "–" : c.value, c.is_default ? "yes" : "no"])));
}

async function groupsView(view) {
  const base = await cluster();
  const groups = (await api(`${base}/consumer-groups`)).data;
  const rows = await Promise.all(groups.map(async (g) => {
    let lag = "–";
    try {
      const d = await api(`${base}/consumer-groups/${encodeURIComponent(g.consumer_group_id)}`);
      lag = number(d.total_lag);
      record(`lag:${g.consumer_group_id}`, d.total_lag);
    } catch { /* a group being deleted */ }
    return [link(`#/groups/${encodeURIComponent(g.consumer_group_id)}`, g.consumer_group_id), g.state, g.type, lag];
  }));
  view.append(h("h2", {}, "Consumer groups"),
    table("Your consumer groups", [{ label: "Group" }, { label: "State" }, { label: "Type" }, { label: "Lag", num: true }], rows),
    lineChart("Lag (records)", groups.map((g) => ({ name: g.consumer_group_id, points: samples.get(`lag:${g.consumer_group_id}`) || [] })), "records"));
}

async function groupView(view, id) {
  const base = await cluster();
  const g = await api(`${base}/consumer-groups/${encodeURIComponent(id)}`);
  record(`lag:${id}`, g.total_lag);
  view.append(h("h2", {}, `Consumer group ${id}`),
    h("p", {}, `State ${g.state}, protocol ${g.protocol_type || "–"}, assignor ${g.partition_assignor || "–"}, lag ${number(g.total_lag)} records.`),
    lineChart("Lag (records)", [{ name: id, points: samples.get(`lag:${id}`) || [] }], "records"),
    table("Members", [{ label: "Member" }, { label: "Client id" }, { label: "Host" }],
      g.members.map((m) => [m.consumer_id, m.client_id, m.client_host])),
    table("Lag by partition", [
      { label: "Topic" }, { label: "Partition", num: true }, { label: "Committed", num: true },
      { label: "Log end", num: true }, { label: "Lag", num: true },
    ], g.lags.map((p) => [link(`#/topics/${encodeURIComponent(p.topic_name)}`, p.topic_name), p.partition_id,
      number(p.current_offset), number(p.log_end_offset), number(p.lag)])));
}

function shown(data) {
  if (data === null || data === undefined) return "null";
  if (data.type === "BINARY") return `(binary, base64) ${data.data}`;
  if (data.type === "STRING") return data.data;
  if (data.type === "JSON") return JSON.stringify(data.data, null, 2);
  const label = data.schema_id !== undefined ? `(${data.type}, schema ${data.schema_id}) ` : `(${data.type}) `;
  return label + JSON.stringify(data.data, null, 2);
}

async function recordsView(view, topic) {
  const base = await cluster();
  const topics = (await api(`${base}/topics`)).data.map((t) => t.topic_name);
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const chosen = topic || params.get("topic") || topics[0] || "";
  const form = h("form", { id: "browse", "aria-label": "Choose records" },
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "b-topic" }, "Topic"),
        h("select", { id: "b-topic", name: "topic" }, topics.map((t) => h("option", { value: t, selected: t === chosen }, t)))),
      h("div", {}, h("label", { for: "b-partition" }, "Partition"),
        h("input", { id: "b-partition", name: "partition", type: "number", min: 0, value: params.get("partition") || 0 })),
      h("div", {}, h("label", { for: "b-start" }, "Start at"),
        h("select", { id: "b-start", name: "start" },
          h("option", { value: "earliest", selected: !params.get("offset") && !params.get("timestamp") }, "the earliest record"),
          h("option", { value: "offset", selected: !!params.get("offset") }, "an offset"),
          h("option", { value: "timestamp", selected: !!params.get("timestamp") }, "a time"))),
      h("div", {}, h("label", { for: "b-offset" }, "Offset"),
        h("input", { id: "b-offset", name: "offset", type: "number", min: 0, value: params.get("offset") || "" })),
      h("div", {}, h("label", { for: "b-time" }, "Time (local)"),
        h("input", { id: "b-time", name: "time", type: "datetime-local", step: 1 })),
      h("div", {}, h("label", { for: "b-format" }, "Show as"),
        h("select", { id: "b-format", name: "format" },
          h("option", { value: "json" }, "JSON, or its registry schema"),
          h("option", { value: "string" }, "text"),
          h("option", { value: "binary" }, "base64"))),
      h("div", {}, h("button", { type: "submit" }, "Show records"))));
  const results = h("div", { id: "records", "aria-live": "polite" });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const f = new FormData(form);
    const q = new URLSearchParams({ format: f.get("format"), max_records: "50" });
    if (f.get("start") === "offset") q.set("offset", f.get("offset") || "0");
    if (f.get("start") === "timestamp") {
      const t = Date.parse(f.get("time"));
      if (Number.isNaN(t)) { setStatus("Choose a time to start at.", true); return; }
      q.set("timestamp", String(t));
    }
    const path = `${base}/topics/${encodeURIComponent(f.get("topic"))}/partitions/${encodeURIComponent(f.get("partition"))}/records?${q}`;
    results.replaceChildren(h("p", {}, "Reading…"));
    try {
      const batch = await api(path);
      results.replaceChildren(
        h("p", {}, `${batch.records.length} records; next offset ${number(batch.next_offset)}, high watermark ${number(batch.high_watermark)}.`),
        table(`Records of ${f.get("topic")} partition ${f.get("partition")}`, [
          { label: "Offset", num: true }, { label: "Timestamp" }, { label: "Key" }, { label: "Value" }, { label: "Headers" },
        ], batch.records.map((r) => [number(r.offset), r.timestamp, h("pre", {}, shown(r.key)), h("pre", {}, shown(r.value)),
          r.headers.map((x) => `${x.name}=${x.value === null ? "null" : atob(x.value)}`).join(", ")])));
      setStatus("");
    } catch (e) {
      results.replaceChildren(h("p", { class: "error" }, e.message));
    }
  });
  view.append(h("h2", {}, "Records"), form, results);
  // Submitted once the view is in the page (a detached form does not submit).
  if (chosen) setTimeout(() => form.isConnected && form.requestSubmit(), 0);
}

// ---------------------------------------------------------------- operator views

async function clusterView(view) {
  const c = await api("/v1/admin/cluster");
  const raft = c.raft;
  record("applied", c.applied_index);
  view.append(h("h2", {}, "Cluster"),
    h("p", {}, `Cluster ${c.cluster_id}: ${number(c.topic_count)} topics, ${number(c.partition_count)} partitions, ${number(c.object_count)} objects.`),
    table("Metadata nodes (Raft voters)", [{ label: "Node", num: true }, { label: "Address" }, { label: "Role" }],
      Object.entries(raft.members).map(([id, addr]) => [id, addr,
        Number(id) === raft.leader ? "leader" : (raft.voters.includes(Number(id)) ? "follower" : "learner")])),
    h("p", {}, `Term ${raft.term}; this agent's node has applied entry ${number(raft.applied_index)}.`),
    lineChart("Metadata entries applied per second", [{ name: "applied", points: rates("applied") }], "entries/s"),
    table("Agents", [{ label: "Agent", num: true }, { label: "Zone" }, { label: "Kafka address" }, { label: "Live" }, { label: "Last heartbeat" }],
      raft.agents.map((a) => [a.info.agent_id, a.info.zone || "–", `${a.info.host}:${a.info.port}`,
        c.live_agent_ids.includes(a.info.agent_id) ? "yes" : "no", new Date(a.last_heartbeat_ms).toISOString()])));
}

async function tenantsView(view) {
  const tenants = (await api("/v1/admin/tenants")).tenants;
  const quota = (q, k) => (q && q[k] !== null && q[k] !== undefined ? number(q[k]) : "–");
  view.append(h("h2", {}, "Tenants"),
    table("Tenants with their users, API keys and quotas (bytes per second, bytes, partitions, requests per second)", [
      { label: "Tenant" }, { label: "Users", num: true }, { label: "API keys", num: true },
      { label: "Produce B/s", num: true }, { label: "Fetch B/s", num: true }, { label: "Storage B", num: true },
      { label: "Partitions", num: true }, { label: "Requests/s", num: true },
    ], tenants.map((t) => [link(`#/usage?tenant=${encodeURIComponent(t.tenant)}`, t.tenant), t.users.length, t.api_keys.length,
      quota(t.quotas, "produce_bytes_per_sec"), quota(t.quotas, "fetch_bytes_per_sec"), quota(t.quotas, "storage_bytes"),
      quota(t.quotas, "partitions"), quota(t.quotas, "requests_per_sec")])));
}

async function usageView(view) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const q = new URLSearchParams({ granularity: "minute" });
  if (params.get("tenant")) q.set("tenant", params.get("tenant"));
  const usage = await api(`/v1/admin/usage?${q}`);
  const tenants = Object.keys(usage.totals);
  const meters = ["produced_bytes", "fetched_bytes", "produced_records", "fetched_records", "kafka_requests", "http_requests", "storage_byte_minutes"];
  const series = tenants.map((t) => ({ name: t || "(no tenant)",
    points: usage.rows.filter((r) => r.tenant === t).map((r) => [r.start_ms, r.meters.produced_bytes || 0]) }));
  view.append(h("h2", {}, params.get("tenant") ? `Usage of ${params.get("tenant")}` : "Usage"),
    h("p", {}, `Metered from ${usage.from} to ${usage.to}; minutes are final through ${usage.closed_through || "–"}.`),
    lineChart("Bytes produced per minute", series, "bytes"),
    table("Totals over the last hour", [{ label: "Tenant" }, ...meters.map((m) => ({ label: m.replaceAll("_", " "), num: true }))],
      tenants.map((t) => [t || "(no tenant)", ...meters.map((m) => number(usage.totals[t][m] || 0))])));
}

// ---------------------------------------------------------------- shell

const VIEWS = {
  tenant: [["#/topics", "Topics"], ["#/groups", "Consumer groups"], ["#/records", "Records"]],
  operator: [["#/cluster", "Cluster"], ["#/tenants", "Tenants"], ["#/usage", "Usage"]],
};

async function render() {
  clearTimeout(refreshTimer);
  const signedIn = !!session.role;
  document.getElementById("sign-in").hidden = signedIn;
  document.getElementById("view").hidden = !signedIn;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  document.getElementById("who").textContent = !signedIn ? ""
    : session.role === "operator" ? "Signed in as the operator"
    : session.open ? "No key needed: this server answers anyone" : "Signed in with an API key";
  if (!signedIn) return;
  const views = VIEWS[session.role];
  if (!location.hash || !views.some(([hash]) => location.hash.startsWith(hash))) {
    location.hash = views[0][0];
    return;
  }
  const links = document.getElementById("nav-links");
  links.replaceChildren(...views.map(([hash, label]) =>
    h("li", {}, h("a", { href: hash, "aria-current": location.hash.startsWith(hash) ? "page" : null }, label))));
  const view = document.getElementById("view");
  const fresh = h("div", { id: "view" });
  const [path] = location.hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const renderers = {
    topics: () => (parts[1] ? topicView(fresh, parts[1]) : topicsView(fresh)),
    groups: () => (parts[1] ? groupView(fresh, parts[1]) : groupsView(fresh)),
    records: () => recordsView(fresh, parts[1]),
    cluster: () => clusterView(fresh),
    tenants: () => tenantsView(fresh),
    usage: () => usageView(fresh),
  };
  // A refresh keeps the keyboard focus where it was (on the link of the same target).
  const focused = view.contains(document.activeElement) ? document.activeElement.getAttribute("href") : null;
  try {
    await renderers[parts[0]]();
    view.replaceWith(fresh);
    if (focused) {
      const again = [...fresh.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === focused);
      if (again) again.focus();
    }
    setStatus("");
  } catch (e) {
    if (e.status === 401) {
      session.clear();
      setStatus("The key was not accepted; sign in again.", true);
      render();
      return;
    }
    setStatus(e.message, true);
  }
  // Overview pages refresh (and sample) every 5 s; the record browser waits for its form.
  if (parts[0] !== "records" && parts[0] !== "tenants") refreshTimer = setTimeout(render, 5000);
}

document.getElementById("sign-in-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const role = form.get("role");
  session.set(String(form.get("token") || "").trim(), role);
  sessionStorage.removeItem("floe.signedOut");
  try {
    await api(role === "operator" ? "/v1/admin/tenants" : "/v3/clusters");
  } catch (e) {
    session.clear();
    setStatus(e.status === 401 ? "The key was not accepted." : e.message, true);
    return;
  }
  setStatus("");
  location.hash = VIEWS[role][0][0];
  render();
  document.getElementById("main").focus();
});

document.getElementById("sign-out").addEventListener("click", () => {
  session.clear();
  sessionStorage.setItem("floe.signedOut", "1");
  clusterId = null;
  samples.clear();
  location.hash = "";
  render();
});

// A server that asks for no key (`floe dev` by default) opens straight on the topics view; after
// a sign-out the form stays, for a key or the operator token.
async function openWithoutKey() {
  if (session.role || sessionStorage.getItem("floe.signedOut")) return;
  try {
    await api("/v3/clusters");
  } catch {
    return;
  }
  session.set("", "tenant");
  sessionStorage.setItem("floe.open", "1");
  // No hashchange event: the render below is the only one.
  if (!location.hash) history.replaceState(null, "", VIEWS.tenant[0][0]);
}

window.addEventListener("hashchange", render);
openWithoutKey().then(render);
