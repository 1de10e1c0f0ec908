// The console's views. Each takes the view element and the route's parameters, asks the
// API for what it shows, and builds the page with dom.js (text nodes only).

import { adminRefused, call, entryPath, metrics } from "./api.js";
import { clip, fill, h, number, when } from "./dom.js";
import { relationGraph } from "./graph.js";

const STATUSES = ["candidate", "confirmed", "disputed", "archived"];
const MODES = ["hybrid", "vector", "lexical"];

let notify = () => {};
/** Set the function that shows a message (kind "error" or "ok"). */
export function onMessage(show) {
  notify = show;
}

function failed(error) {
  notify(error.describe ? error.describe() : String(error), "error");
}

// ------------------------------------------------------------------------- shared parts

function badge(text, kind) {
  return h("span", { class: `badge ${kind || ""}` }, text);
}

function statusBadge(status) {
  return badge(status, `status-${status}`);
}

function confidence(value) {
  const meter = h("meter", { min: 0, max: 1, low: 0.3, high: 0.8, optimum: 1, value: value ?? 0 });
  return h("span", { class: "confidence", title: `confidence ${number(value, 3)}` }, meter, " ", number(value));
}

function entryLink(id, text) {
  return h("a", { href: `#/entry/${id}`, class: "entry-link" }, text);
}

/** Buttons of an admin action: disabled (with the reason) once the API refused one. */
function adminButton(label, action, extra = {}) {
  const refused = adminRefused();
  const button = h("button", {
    type: "button", class: "admin", disabled: refused,
    title: refused ? "The API refused admin actions to this token (403)" : null, ...extra,
  }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await action();
    } catch (error) {
      failed(error);
      if (error.status === 403) disableAdmin();
      else button.disabled = false;
    }
  });
  return button;
}

function disableAdmin() {
  for (const button of document.querySelectorAll("button.admin")) {
    button.disabled = true;
    button.title = "The API refused admin actions to this token (403)";
  }
}

function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", {}, title), ...children);
}

// ------------------------------------------------------------------------------- search

export async function searchView(view, params) {
  const form = h("form", { class: "search", id: "search-form" },
    h("input", { type: "search", name: "q", value: params.q || "", placeholder: "Search what the agents know (under 3 characters: newest first)", "aria-label": "Query" }),
    h("label", {}, "mode ", h("select", { name: "mode" },
      MODES.map((m) => h("option", { value: m, selected: (params.mode || "hybrid") === m }, m)))),
    h("fieldset", { class: "statuses" }, h("legend", {}, "status"),
      STATUSES.map((st) => h("label", {}, h("input", {
        type: "checkbox", name: "status", value: st,
        checked: (params.status ? params.status.split(",") : ["candidate", "confirmed"]).includes(st),
      }), ` ${st}`))),
    h("label", {}, "domain ", h("input", { name: "domain", value: params.domain || "", size: 12 })),
    h("label", {}, "tags ", h("input", { name: "tags", value: params.tags || "", size: 14, placeholder: "a, b" })),
    h("label", {}, "min confidence ", h("input", { name: "min", type: "number", min: 0, max: 1, step: 0.05, value: params.min ?? "0.3" })),
    h("button", { type: "submit" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = new URLSearchParams();
    next.set("q", data.get("q") || "");
    next.set("mode", data.get("mode"));
    next.set("status", data.getAll("status").join(","));
    if (data.get("domain")) next.set("domain", data.get("domain"));
    if (data.get("tags")) next.set("tags", data.get("tags"));
    next.set("min", data.get("min") || "0");
    const target = `#/search?${next}`;
    if (location.hash === target) route();
    else location.hash = target;
  });
  const results = h("div", { id: "results" });
  fill(view, h("h1", {}, "Search"), form, results);
  const body = {
    query: params.q || "",
    mode: params.mode || "hybrid",
    min_confidence: Number(params.min ?? 0.3),
    limit: 50,
    status: params.status ? params.status.split(",").filter(Boolean) : undefined,
  };
  if (params.domain) body.knowledge_domain = params.domain;
  if (params.tags) body.tags = params.tags.split(",").map((t) => t.trim()).filter(Boolean);
  let found;
  try {
    found = await call("POST", "/query", { body });
  } catch (error) {
    failed(error);
    results.dataset.query = body.query;
    fill(results, h("p", { class: "muted" }, "The search did not run (see the message above)."));
    return;
  }
  const count = found.entries.length;
  results.dataset.query = body.query;
  fill(results,
    h("p", { class: "muted" }, `${count} ${count === 1 ? "entry" : "entries"} (${found.mode})`),
    h("ol", { class: "results" }, found.entries.map(resultItem)),
  );
}

function resultItem(entry) {
  const signals = Object.entries(entry.signals || {});
  return h("li", { class: "result", dataset: { id: entry.id } },
    h("p", { class: "content" }, entryLink(entry.id, clip(entry.content, 400))),
    h("div", { class: "meta" },
      confidence(entry.confidence), " ",
      statusBadge(entry.status), " ",
      badge(entry.access_scope, "scope"), " ",
      badge(entry.knowledge_domain, "domain"), " ",
      (entry.tags || []).map((t) => [badge(`#${t}`, "tag"), " "]),
      signals.length
        ? h("span", { class: "signals" }, "found by ", signals.map(([name, score]) => badge(`${name} ${number(score)}`, `signal signal-${name}`)))
        : null,
      h("span", { class: "muted" }, ` · ${entry.source_agent} · ${when(entry.created_at)}`),
    ),
  );
}

// -------------------------------------------------------------------------------- entry

export async function entryView(view, params) {
  const id = params.id;
  fill(view, h("p", { class: "muted" }, "Loading entry…"));
  let entry;
  try {
    entry = await call("GET", entryPath(id));
  } catch (error) {
    failed(error);
    fill(view, h("h1", {}, "Entry"), h("p", { class: "muted" }, "This entry cannot be shown."));
    return;
  }
  const [evidence, relations] = await Promise.all([
    call("GET", `${entryPath(id)}/evidence`).then((r) => r.evidence, (e) => { failed(e); return []; }),
    call("GET", `${entryPath(id)}/relations`).then((r) => r.relations, (e) => { failed(e); return []; }),
  ]);
  const agents = [...new Set(evidence.map((e) => e.agent_id))];
  const standing = Object.fromEntries(await Promise.all(agents.map((agent) =>
    call("GET", `/sources/${encodeURIComponent(agent)}`).then((r) => [agent, r], () => [agent, null]))));
  fill(view,
    h("h1", {}, "Entry ", h("code", {}, entry.id)),
    h("article", { class: "panel entry" },
      h("p", { class: "entry-content", id: "entry-content" }, entry.content),
      h("div", { class: "meta" }, confidence(entry.confidence), " ", statusBadge(entry.status), " ",
        badge(entry.content_type, "type"), " ", badge(entry.access_scope, "scope"), " ", badge(entry.knowledge_domain, "domain"), " ",
        (entry.tags || []).map((t) => [badge(`#${t}`, "tag"), " "])),
    ),
    lifecycle(entry),
    evidenceSection(evidence, standing),
    section(`Relations (${relations.filter((r) => r.direction === "in").length} in, ${relations.filter((r) => r.direction === "out").length} out)`,
      relations.length ? h("div", { class: "graph-wrap" }, relationGraph(entry, relations)) : h("p", { class: "muted" }, "No relations."),
      relations.length ? h("ul", { class: "relations" }, relations.map((r) => h("li", {},
        r.direction === "out" ? "→ " : "← ", badge(r.relation_type, `rel rel-${r.relation_type}`), " ",
        entryLink(r.id, clip(r.content, 160)), " ", statusBadge(r.status), " ", number(r.confidence)))) : null,
    ),
    actions(entry),
    section("Source context", h("pre", { class: "json" }, JSON.stringify(entry.source_context || {}, null, 2))),
  );
}

function lifecycle(entry) {
  const context = entry.source_context || {};
  const rows = [
    ["Status", statusBadge(entry.status)],
    ["Created", when(entry.created_at)],
    ["Updated", when(entry.updated_at)],
    ["Confirmed", when(entry.confirmed_at)],
    ["Last decayed", when(entry.decayed_at)],
    ["Accessed", `${entry.access_count ?? 0} times`],
    ["Source", `${entry.source?.agent_id ?? "—"} (provider ${entry.source?.provider ?? "—"}${entry.source?.channel ? `, channel ${entry.source.channel}` : ""})`],
    ["Owner", entry.owner_id ?? "—"],
  ];
  if (context.deprecation_reason !== undefined) rows.push(["Deprecated because", String(context.deprecation_reason)]);
  if (context.archive_reason !== undefined) rows.push(["Archived because", String(context.archive_reason)]);
  if (context.dispute_resolution !== undefined) rows.push(["Dispute resolution", JSON.stringify(context.dispute_resolution)]);
  if (context.bootstrap !== undefined) rows.push(["Confirmed by bootstrap", JSON.stringify(context.bootstrap)]);
  return section("Lifecycle", h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
}

function evidenceSection(evidence, standing) {
  const independent = evidence.filter((e) => e.independent).length;
  return section(`Evidence (${independent} independent ${independent === 1 ? "source" : "sources"})`,
    evidence.length ? h("table", { class: "evidence" },
      h("thead", {}, h("tr", {}, ["Source", "Provider", "Channel", "Kind", "Similarity", "Credibility then", "Credibility now", "Independent"].map((c) => h("th", {}, c)))),
      h("tbody", {}, evidence.map((e) => {
        const now = standing[e.agent_id];
        return h("tr", {},
          h("td", {}, e.agent_id), h("td", {}, e.provider), h("td", {}, e.channel ?? "—"), h("td", {}, e.kind),
          h("td", {}, number(e.similarity)), h("td", {}, number(e.credibility)),
          h("td", {}, now ? `${number(now.credibility)}${now.label ? ` (${now.label})` : ""}` : "—"),
          h("td", { class: e.independent ? "yes" : "no" }, e.independent ? "yes" : "no"));
      })),
    ) : h("p", { class: "muted" }, "No evidence recorded."));
}

function actions(entry) {
  const reason = h("input", { name: "reason", placeholder: "why it is deprecated", size: 30, "aria-label": "Deprecation reason" });
  const deprecate = adminButton("Deprecate", async () => {
    const text = reason.value.trim();
    if (!text) throw new Error("Give a reason to deprecate the entry.");
    const result = await call("POST", `${entryPath(entry.id)}/deprecate`, { body: { reason: text }, admin: true });
    notify(`Deprecated: the entry is ${result.status}${result.changed ? "" : " (unchanged)"}.`, "ok");
    await route();
  }, { id: "deprecate" });
  const parts = [h("div", { class: "action" }, reason, " ", deprecate)];
  if (entry.status === "disputed") {
    parts.push(h("div", { class: "action" }, "Resolve the dispute: ",
      ["accept", "keep", "reject"].map((resolution) => [adminButton(resolution, () => resolve(entry.id, resolution), { dataset: { resolution } }), " "])));
  }
  return section("Curation (admin)", ...parts);
}

async function resolve(id, resolution) {
  const result = await call("POST", `${entryPath(id)}/resolve`, { body: { resolution }, admin: true });
  notify(`Resolved (${resolution}): the entry is ${result.status}.`, "ok");
  await route();
}

// ----------------------------------------------------------------------------- disputes

export async function disputesView(view) {
  fill(view, h("h1", {}, "Disputes"), h("p", { class: "muted" }, "Loading disputed entries…"));
  let disputed;
  try {
    disputed = (await call("POST", "/query", { body: { query: "", status: ["disputed"], min_confidence: 0, limit: 100 } })).entries;
  } catch (error) {
    failed(error);
    fill(view, h("h1", {}, "Disputes"), h("p", { class: "muted" }, "The queue cannot be shown."));
    return;
  }
  const byId = new Map(disputed.map((e) => [e.id, e]));
  const links = await Promise.all(disputed.map((e) =>
    call("GET", `${entryPath(e.id)}/relations`).then((r) => r.relations, () => [])));
  const pairs = [];
  const seen = new Set();
  disputed.forEach((entry, i) => {
    const counterparts = links[i].filter((r) => r.relation_type === "contradicts");
    if (!counterparts.length && !seen.has(entry.id)) {
      pairs.push([entry, null]);
      seen.add(entry.id);
    }
    for (const other of counterparts) {
      const key = [entry.id, other.id].sort().join(" ");
      if (seen.has(key)) continue;
      seen.add(key);
      seen.add(entry.id);
      pairs.push([entry, byId.get(other.id) || other]);
    }
  });
  fill(view,
    h("h1", {}, "Disputes"),
    h("p", { class: "muted" }, `${disputed.length} disputed ${disputed.length === 1 ? "entry" : "entries"}. Accept or keep confirms a side (accepting one archives the other); reject archives it.`),
    pairs.length ? h("div", { class: "disputes" }, pairs.map(([a, b]) => h("div", { class: "dispute" }, side(a), b ? h("div", { class: "versus" }, "contradicts") : null, b ? side(b) : null)))
      : h("p", {}, "No disputes: nothing to review."),
  );
}

function side(entry) {
  const actions = entry.status === "disputed"
    ? h("div", { class: "action" }, ["accept", "keep", "reject"].map((resolution) =>
      [adminButton(resolution, async () => {
        const result = await call("POST", `${entryPath(entry.id)}/resolve`, { body: { resolution }, admin: true });
        notify(`Resolved (${resolution}): "${clip(entry.content, 60)}" is ${result.status}.`, "ok");
        await route();
      }, { dataset: { resolution, entry: entry.id } }), " "]))
    : h("p", { class: "muted" }, `(${entry.status}: not in dispute)`);
  return h("div", { class: "side panel", dataset: { id: entry.id } },
    h("p", { class: "content" }, entryLink(entry.id, entry.content)),
    h("div", { class: "meta" }, confidence(entry.confidence), " ", statusBadge(entry.status),
      entry.source_agent ? h("span", { class: "muted" }, ` · ${entry.source_agent} · ${when(entry.created_at)}`) : null),
    actions,
  );
}

// ---------------------------------------------------------------------------- expertise

export async function expertiseView(view, params) {
  const threshold = Math.max(1, Number(params.min_agents || 2));
  fill(view, h("h1", {}, "Expertise"), h("p", { class: "muted" }, "Loading…"));
  let domains;
  let atRisk;
  try {
    [domains, atRisk] = await Promise.all([
      call("GET", "/expertise/at-risk", { query: { min_agents: 1000000 } }).then((r) => r.domains),
      call("GET", "/expertise/at-risk", { query: { min_agents: threshold } }).then((r) => r.domains),
    ]);
  } catch (error) {
    failed(error);
    fill(view, h("h1", {}, "Expertise"), h("p", { class: "muted" }, "Expertise cannot be shown."));
    return;
  }
  domains.sort((a, b) => a.knowledge_domain.localeCompare(b.knowledge_domain));
  const records = await Promise.all(domains.map((d) =>
    call("GET", `/expertise/${encodeURIComponent(d.knowledge_domain)}`).then((r) => r.agents, () => [])));
  const agents = [...new Set(records.flat().map((r) => r.agent_id))].sort();
  const table = h("table", { class: "heatmap" },
    h("thead", {}, h("tr", {}, h("th", {}, "domain \\ agent"), agents.map((a) => h("th", { class: "agent" }, a)))),
    h("tbody", {}, domains.map((d, i) => {
      const mine = Object.fromEntries(records[i].map((r) => [r.agent_id, r]));
      return h("tr", {}, h("th", {}, d.knowledge_domain), agents.map((a) => heatCell(mine[a])));
    })));
  const form = h("form", { class: "inline" }, h("label", {}, "at risk below ",
    h("input", { name: "min_agents", type: "number", min: 1, value: threshold, size: 4 }), " agents "), h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/expertise?min_agents=${encodeURIComponent(new FormData(form).get("min_agents"))}`;
  });
  fill(view,
    h("h1", {}, "Expertise"),
    section("Proficiency by domain and agent",
      domains.length ? h("div", { class: "scroll" }, table) : h("p", { class: "muted" }, "No agent has written to any domain you can see."),
      h("p", { class: "muted" }, "Proficiency = min(average confidence × log2(entries + 1), 1), over the active entries you may see.")),
    section("Domains at risk", form,
      atRisk.length ? h("ul", { class: "at-risk" }, atRisk.map((d) => h("li", {},
        h("strong", {}, d.knowledge_domain), ` — ${d.agent_count} ${d.agent_count === 1 ? "agent" : "agents"}: ${d.agents.join(", ")}`)))
        : h("p", {}, `Every domain is covered by at least ${threshold} agents.`)),
  );
}

function heatCell(record) {
  if (!record) return h("td", { class: "heat empty" }, "");
  const cell = h("td", { class: "heat", title: `${record.agent_id}: proficiency ${number(record.proficiency, 3)}, ${record.entry_count} entries` }, number(record.proficiency));
  const level = Math.max(0, Math.min(1, record.proficiency));
  cell.style.backgroundColor = `hsl(${210 - 170 * level} 70% ${92 - 45 * level}%)`;
  if (level > 0.6) cell.classList.add("dark");
  return cell;
}

// ----------------------------------------------------------------------------- activity

export async function activityView(view) {
  fill(view, h("h1", {}, "Activity"), h("p", { class: "muted" }, "Loading…"));
  const [stats, series] = await Promise.all([
    call("GET", "/stats").catch((e) => { failed(e); return null; }),
    metrics().catch((e) => { failed(e); return null; }),
  ]);
  const refresh = h("button", { type: "button", id: "refresh" }, "Refresh");
  refresh.addEventListener("click", () => route());
  fill(view, h("h1", {}, "Activity ", refresh), storeSection(stats), countersSection(series));
}

function storeSection(stats) {
  if (!stats) return section("Store", h("p", { class: "muted" }, "Store statistics are unavailable."));
  const most = Math.max(1, ...Object.values(stats.by_status));
  return section("Store (entries you may see)",
    h("dl", { class: "facts" },
      [["Entries", stats.total], ["Active", stats.active], ["New in the last 24 h", stats.last_24h],
        ["Average confidence", number(stats.average_confidence, 3)], ["Relations", stats.total_relations]]
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))])),
    h("h3", {}, "By status"), bars(stats.by_status, most, "status"),
    h("h3", {}, "By content type"), bars(stats.by_content_type, Math.max(1, ...Object.values(stats.by_content_type)), "type"));
}

function bars(counts, most, kind) {
  return h("table", { class: "bars" }, Object.entries(counts).map(([name, count]) => {
    const bar = h("progress", { class: `bar ${kind}-${name}`, max: most, value: count }, String(count));
    return h("tr", {}, h("th", {}, name), h("td", { class: "bar-cell" }, bar), h("td", { class: "num" }, String(count)));
  }));
}

function total(series, name, filter = () => true) {
  return (series[name] || []).filter((s) => filter(s.labels)).reduce((sum, s) => sum + s.value, 0);
}

function countersSection(series) {
  if (!series) return section("Service counters", h("p", { class: "muted" }, "Metrics are unavailable."));
  const outcomes = Object.fromEntries((series.apollo_ingest_total || []).map((s) => [s.labels.outcome, s.value]));
  const queues = (series.apollo_queue_depth || []).map((s) => [s.labels.queue, s.value]);
  const requests = series.apollo_http_requests_total || [];
  const byClass = {};
  for (const r of requests) byClass[`${r.labels.status[0]}xx`] = (byClass[`${r.labels.status[0]}xx`] || 0) + r.value;
  return section("Service counters (since the service started)",
    h("dl", { class: "facts" },
      [["Queries answered", total(series, "apollo_query_seconds_count")],
        ...Object.entries(outcomes).map(([o, v]) => [`Ingests ${o}`, v]),
        ["Entries decayed", total(series, "apollo_decayed_total")],
        ["Entries archived", total(series, "apollo_archived_total")],
        ...queues.map(([q, v]) => [q === "outbox" ? "Outbox backlog (contradiction scans)" : `Queue ${q}`, v]),
        ...Object.entries(byClass).sort().map(([c, v]) => [`HTTP ${c} responses`, v])]
        .map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(Math.round(v)))])));
}

// ------------------------------------------------------------------------------ routing

let route = async () => {};
/** Set the function that re-renders the current route (after an action). */
export function onRoute(render) {
  route = render;
}
