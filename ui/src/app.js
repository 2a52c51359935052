// allot web UI: read-only pages over the server's HTTP API. Routes live in
// the URL fragment (#/budgets, #/job/<id>), and every API call is relative
// to the page (../v1/...), so the UI works behind a path prefix.
"use strict";
(function () {
  const REFRESH_MS = 5000;
  const TOKEN_KEY = "allot-token";
  const main = document.getElementById("main");
  const statusEl = document.getElementById("status");
  const pauseBtn = document.getElementById("pause");
  const tokenForm = document.getElementById("token-form");
  let current = null; // the mounted page: {refresh()}
  let staleReads = 0; // reads answered from a follower's own state since the last refresh
  let paused = false;
  let timer = null;
  window.allotCharts = [];
  window.allotReady = null;

  // ---- API ---------------------------------------------------------------
  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }
  async function api(path, params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== "" && v != null) q.set(k, v);
    const url = "../v1/" + path + (q.toString() ? "?" + q : "");
    const headers = { Accept: "application/json" };
    const tok = sessionStorage.getItem(TOKEN_KEY);
    if (tok) headers.Authorization = "Bearer " + tok;
    let resp = await fetch(url, { headers, credentials: "same-origin" });
    // A follower that cannot reach the leader answers 503; its own copy of
    // the state (?stale) is still worth showing, and is marked as such.
    if (resp.status === 503 && !q.has("stale")) {
      q.set("stale", "");
      const again = await fetch("../v1/" + path + "?" + q, { headers, credentials: "same-origin" });
      if (again.ok) { resp = again; staleReads++; }
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const msg = (body && body.error) || resp.statusText;
      if (resp.status === 401 || (resp.status === 403 && /token/i.test(msg))) askToken(msg);
      throw new APIError(resp.status, msg);
    }
    return body;
  }
  function askToken(msg) {
    document.getElementById("token-why").textContent = "The server refused this read: " + msg;
    tokenForm.hidden = false;
    document.getElementById("token-input").focus();
  }
  tokenForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token-input").value);
    tokenForm.hidden = true;
    route();
  });

  // ---- helpers -----------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid == null || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const isInf = (r) => r === "inf" || r === Infinity;
  function fmtRatio(r, digits) {
    if (r == null) return "–";
    if (isInf(r)) return "∞";
    return Number(r).toFixed(digits == null ? 2 : digits);
  }
  function pct(r, digits) {
    if (r == null) return "–";
    if (isInf(r)) return "∞";
    return (100 * Number(r)).toFixed(digits == null ? 1 : digits) + "%";
  }
  const num = (x, d) => (x == null ? "–" : Number(x).toFixed(d == null ? 1 : d));
  function time(t) {
    if (!t || t.startsWith("0001-")) return "–";
    const d = new Date(t);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/:00Z$/, "Z");
  }
  function dur(ns) {
    if (!ns) return "0 (unallocated)";
    let s = Math.round(ns / 1e9);
    const parts = [];
    for (const [u, n] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
      if (s >= n) { parts.push(Math.floor(s / n) + u); s %= n; }
    }
    return parts.join("");
  }
  const enc = encodeURIComponent;
  // short cuts a Nomad UUID to its first 8 characters, as Nomad's CLI does.
  const short = (id) => (/^[0-9a-f]{8}-[0-9a-f-]{27}$/.test(id) ? id.slice(0, 8) : id);
  const jobLink = (id) => (id ? h("a", { href: "#/job/" + enc(id) }, id) : "–");
  const budgetLink = (p) => (p ? h("a", { href: "#/budgets/" + enc(p) }, p) : "–");
  function setStatus(text, bad) {
    statusEl.textContent = text;
    statusEl.className = bad ? "bad" : "";
  }
  function showError(where, err) {
    where.replaceChildren(h("p", { class: "error", role: "alert" }, String(err.message || err)));
  }
  function table(headers, rows, opts) {
    const thead = h("thead", {}, h("tr", {}, headers.map((c) => {
      const [label, cls] = Array.isArray(c) ? c : [c, ""];
      return h("th", { scope: "col", class: cls || null }, label);
    })));
    return h("table", opts || {}, thead, h("tbody", {}, rows));
  }
  const td = (v, cls) => h("td", { class: cls || null }, v);

  // Colours grouped by program: each child of the root gets a hue, and the
  // budgets under it shades of that hue. Red is left out: it means an error
  // here, and a preemption in the simulator's report.
  const HUES = [212, 140, 268, 32, 185, 318, 52, 240, 96, 196, 290, 15];
  function programIndex(programs, p) {
    const i = programs.indexOf(p);
    return i < 0 ? 0 : i;
  }
  function colourFor(programs, serie, k, n) {
    const hue = HUES[programIndex(programs, serie.program || serie.path) % HUES.length];
    const light = n <= 1 ? 38 : 28 + Math.round((k * 34) / (n - 1));
    const sat = n <= 1 ? 70 : 75 - Math.round((k * 25) / (n - 1));
    return `hsl(${hue} ${sat}% ${light}%)`;
  }

  // ---- charts (uPlot) ----------------------------------------------------
  // chartInfo is what the browser tests read of a chart: its series, points
  // and largest value.
  function chartInfo(title, times, series) {
    let max = 0;
    for (const s of series) for (const v of s.values) if (v != null && v > max) max = v;
    return { title, series: series.length, points: times.length, max };
  }

  // lineChart draws series of [times, ...values] with uPlot. marks is an
  // optional {from, label} band drawn behind the data (the lookback window).
  function lineChart(el, title, times, series, mark) {
    const width = Math.max(320, Math.min(el.clientWidth || 900, 1400) - 14);
    const opts = {
      title, width, height: 300,
      scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.08)] } },
      axes: [{}, { label: "GPUs", size: 56 }],
      cursor: { focus: { prox: 24 } },
      focus: { alpha: 0.35 },
      legend: { live: true },
      series: [{ label: "time", value: (u, v) => (v == null ? "–" : new Date(v * 1000).toISOString().slice(0, 16).replace("T", " ") + "Z") }]
        .concat(series.map((s) => ({ label: s.label, stroke: s.stroke, width: s.dash ? 1.5 : 2, dash: s.dash,
          points: { show: false }, value: (u, v) => (v == null ? "–" : v.toFixed(2) + " GPUs") }))),
      hooks: {
        drawClear: [(u) => {
          if (!mark) return;
          const x0 = Math.max(u.bbox.left, u.valToPos(Math.max(mark.from, u.scales.x.min), "x", true));
          const x1 = u.valToPos(u.scales.x.max, "x", true);
          const ctx = u.ctx;
          ctx.save();
          ctx.fillStyle = "rgba(11, 87, 208, 0.07)";
          ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
          ctx.strokeStyle = "rgba(11, 87, 208, 0.6)";
          ctx.setLineDash([2, 3]);
          ctx.beginPath(); ctx.moveTo(x0, u.bbox.top); ctx.lineTo(x0, u.bbox.top + u.bbox.height); ctx.stroke();
          ctx.fillStyle = "#0b57d0";
          ctx.font = `${Math.round(12 * devicePixelRatio)}px system-ui, sans-serif`;
          ctx.fillText(mark.label, x0 + 4 * devicePixelRatio, u.bbox.top + 14 * devicePixelRatio);
          ctx.restore();
        }],
      },
    };
    const data = [times].concat(series.map((s) => s.values));
    el.replaceChildren();
    const u = new uPlot(opts, data, el);
    u.root.setAttribute("role", "img");
    u.root.setAttribute("aria-label", title + ": " + series.map((s) => s.label).join(", "));
    u.__title = title;
    window.allotCharts.push(chartInfo(title, times, series));
    return u;
  }

  // ---- pages ---------------------------------------------------------------
  const RANGES = [["6h", "6h"], ["24h", "24h"], ["7d", "7d"], ["14d", "14d"]];

  function budgetsPage(params) {
    const path = params.rest || "";
    let range = params.q.get("range") || "7d";
    const head = h("h1", {}, path ? "Budget " + path : "Budgets");
    const seg = h("div", { class: "seg", role: "radiogroup", "aria-label": "Time range" });
    const rangeButtons = RANGES.map(([v, label]) => {
      const b = h("button", { type: "button", role: "radio", "aria-checked": String(v === range), "data-range": v,
        onclick: () => { range = v; rangeButtons.forEach((x) => x.setAttribute("aria-checked", String(x.dataset.range === v))); refresh(); } }, label);
      return b;
    });
    seg.append(...rangeButtons);
    seg.addEventListener("keydown", (ev) => {
      const i = RANGES.findIndex(([v]) => v === range);
      const j = ev.key === "ArrowRight" ? i + 1 : ev.key === "ArrowLeft" ? i - 1 : -1;
      if (j >= 0 && j < RANGES.length) { rangeButtons[j].click(); rangeButtons[j].focus(); ev.preventDefault(); }
    });
    const usedEl = h("div", { class: "chart", id: "chart-used" });
    const demandEl = h("div", { class: "chart", id: "chart-demand" });
    const note = h("p", { class: "chart-note", id: "chart-note" });
    const treeEl = h("div", { id: "budget-tree" });
    main.replaceChildren(head,
      h("div", { class: "controls" }, h("span", { class: "muted", id: "range-label" }, "Range"), seg),
      h("h2", {}, "GPUs used against allocation"), note, usedEl,
      h("h2", {}, "Demand (GPUs of running and pending allocated work)"), demandEl,
      h("h2", {}, "Budget tree"), treeEl);
    seg.setAttribute("aria-labelledby", "range-label");
    let charts = [];
    let chartKey = "";

    async function refresh() {
      // All five requests in flight at once; only the longest window waits
      // for the series, which says how much history the ledger keeps: 30
      // days when it keeps them, its whole retention otherwise.
      const seriesP = api("usage/series", { budget: path, since: range });
      const longest = seriesP.then((x) => (x.retention_seconds >= 30 * 86400 ? "30d" : Math.floor(x.retention_seconds / 86400) + "d"));
      const [series, tree, w3, ...usages] = await Promise.all([seriesP, api("budgets"), longest,
        api("usage", { since: "1d" }), api("usage", { since: "7d" }), longest.then((w) => api("usage", { since: w }))]);
      const windows = ["1d", "7d", w3];
      const programs = tree.budgets.filter((b) => b.path.split("/").length === 2).map((b) => b.path);
      drawCharts(series, programs);
      drawTree(tree, usages, windows);
    }

    function drawCharts(s, programs) {
      if (!s.series.length) {
        charts.forEach((c) => c.destroy());
        window.allotCharts = [];
        usedEl.replaceChildren(h("p", { class: "muted" }, "No budgets applied yet (allot budgets apply DIR)."));
        demandEl.replaceChildren();
        charts = [];
        chartKey = "";
        return;
      }
      const self = s.series[0];
      const shown = s.series.length > 1 ? s.series.slice(1) : [self];
      const byProgram = {};
      shown.forEach((x) => (byProgram[x.program || x.path] = (byProgram[x.program || x.path] || 0) + 1));
      const seen = {};
      const colours = shown.map((x) => {
        const p = x.program || x.path;
        seen[p] = (seen[p] || 0) + 1;
        return colourFor(programs.length ? programs : [p], x, seen[p] - 1, byProgram[p]);
      });
      const used = [], demand = [];
      shown.forEach((x, i) => {
        const name = x.path.split("/").pop();
        used.push({ label: name + " used", stroke: colours[i], values: x.used_gpus });
        used.push({ label: name + " share", stroke: colours[i], dash: [6, 4], values: x.used_gpus.map(() => x.allocation_gpus) });
        demand.push({ label: name + " demand", stroke: colours[i], values: x.demand_gpus });
      });
      const lb = s.lookback_seconds;
      const mark = { from: s.to ? Date.parse(s.to) / 1000 - lb : 0, label: "lookback window (" + dur(lb * 1e9) + ")" };
      note.textContent = `${self.path}: ${shown.length} ${s.series.length > 1 ? "children" : "budget"}, a point per ${dur(s.step_seconds * 1e9)}; ` +
        `solid: GPUs used (average over the step), dashed: allocation (effective share × ${s.capacity_gpus} GPUs); shaded: the fair-share lookback window. Hover for exact values; click a legend entry to hide it.`;
      // A refresh with the same series updates the data in place, so the
      // series a reader has hidden in the legend stay hidden.
      const key = [range, ...used.map((x) => x.label + x.stroke)].join("|");
      if (charts.length === 2 && chartKey === key) {
        charts[0].setData([s.times].concat(used.map((x) => x.values)));
        charts[1].setData([s.times].concat(demand.map((x) => x.values)));
        window.allotCharts = [chartInfo(charts[0].__title, s.times, used), chartInfo(charts[1].__title, s.times, demand)];
        return;
      }
      charts.forEach((c) => c.destroy());
      window.allotCharts = [];
      chartKey = key;
      charts = [lineChart(usedEl, "GPUs used vs allocation: " + self.path, s.times, used, mark),
        lineChart(demandEl, "Demand: " + self.path, s.times, demand, mark)];
    }

    function drawTree(tree, usages, windows) {
      const rows = [];
      const by = usages.map((u) => Object.fromEntries(u.budgets.map((b) => [b.path, b])));
      const prefix = path ? path + "/" : "";
      const programs = tree.budgets.filter((b) => b.path.split("/").length === 2).map((b) => b.path);
      for (const b of tree.budgets) {
        if (path && b.path !== path && !b.path.startsWith(prefix)) continue;
        const depth = b.path.split("/").length - 1;
        const prog = b.path.split("/").slice(0, 2).join("/");
        const colour = depth === 0 ? "#6b7280" : `hsl(${HUES[programIndex(programs, prog) % HUES.length]} 70% 40%)`;
        const cells = [h("td", { style: `padding-left:${8 + 16 * depth}px` },
          h("span", { class: "swatch", style: `background:${colour}`, "aria-hidden": "true" }), budgetLink(b.path)),
          td(depth === 0 ? "–" : num(b.share, 0), "num"), td(pct(b.normalized), "num"), td(pct(b.effective), "num")];
        for (const m of by) {
          const r = m[b.path];
          cells.push(td(r ? pct(r.delivered_over_owed, 0) : "–", "num"));
        }
        const w7 = by[1][b.path];
        cells.push(td(w7 ? pct(w7.credited_over_owed, 0) : "–", "num"));
        cells.push(td(w7 ? num(w7.charged_gpu_hours) : "–", "num"), td(w7 ? num(w7.owed_gpu_hours) : "–", "num"),
          td(w7 ? num(w7.demand_gpu_hours) : "–", "num"));
        rows.push(h("tr", { "data-path": b.path }, cells));
      }
      treeEl.replaceChildren(
        h("p", { class: "muted" }, `Revision ${tree.revision || "–"}, applied ${time(tree.applied_at)}. Owed is, hour by hour, min(effective share × capacity, demand), summed; delivered/owed is the GPU time charged over the window against it (above 100% for a budget served more than it was owed). Same hour counts each hour's charge only up to that hour's owed, so an hour's surplus does not pay for another hour's shortfall.`),
        table(["Budget", ["Declared share", "num"], ["Of parent", "num"], ["Of cluster", "num"],
          ...windows.map((w) => [`Delivered/owed ${w}`, "num"]), ["Same hour 7d", "num"], ["Charged GPU-h 7d", "num"], ["Owed GPU-h 7d", "num"], ["Demand GPU-h 7d", "num"]],
        rows, { class: "tree", id: "tree-table" }));
    }
    return { refresh, destroy: () => charts.forEach((c) => c.destroy()) };
  }

  function chain(st) {
    if (!st) return "–";
    return h("span", { class: "chain", title: "level fairshare LF = S/U, compared from the top down" },
      st.parts.map((p) => h("span", { title: `${p.path}: share ${pct(p.share)}, usage ${pct(p.usage_fraction)}` }, fmtRatio(p.level_fairshare))));
  }

  function queuePage(params) {
    const q = params.q;
    const budgetSel = h("select", { id: "f-budget" }, h("option", { value: "" }, "all budgets"));
    const nsSel = h("select", { id: "f-ns" }, h("option", { value: "" }, "all namespaces"));
    const search = h("input", { id: "f-job", type: "search", placeholder: "job ID", value: q.get("job") || "" });
    const out = h("div", { id: "queue-table" });
    const count = h("p", { class: "muted", id: "queue-count" });
    main.replaceChildren(h("h1", {}, "Queue"),
      h("div", { class: "controls", role: "search" },
        h("label", { for: "f-budget" }, "Budget", budgetSel), h("label", { for: "f-ns" }, "Namespace", nsSel),
        h("label", { for: "f-job" }, "Search job IDs", search)), count, out);
    let data = null;
    const want = { budget: q.get("budget") || "", ns: q.get("namespace") || "" };
    const apply = () => {
      want.budget = budgetSel.value; want.ns = nsSel.value;
      const p = new URLSearchParams();
      if (want.budget) p.set("budget", want.budget);
      if (want.ns) p.set("namespace", want.ns);
      if (search.value) p.set("job", search.value);
      history.replaceState(null, "", "#/queue" + (p.toString() ? "?" + p : ""));
      draw();
    };
    budgetSel.addEventListener("change", apply);
    nsSel.addEventListener("change", apply);
    search.addEventListener("input", apply);
    function fillSelect(sel, values, keep) {
      const have = [...sel.options].map((o) => o.value).slice(1).join("\n");
      if (have === values.join("\n")) return;
      sel.replaceChildren(sel.options[0], ...values.map((v) => h("option", { value: v }, v)));
      sel.value = values.includes(keep) ? keep : "";
    }
    function draw() {
      if (!data) return;
      const budgets = new Set(), nss = new Set();
      for (const j of data.jobs) {
        nss.add(j.job_id.split("/")[0]);
        if (j.budget) j.budget.split("/").forEach((_, i, a) => budgets.add(a.slice(0, i + 1).join("/")));
      }
      fillSelect(budgetSel, [...budgets].sort(), want.budget);
      fillSelect(nsSel, [...nss].sort(), want.ns);
      const term = search.value.trim().toLowerCase();
      const jobs = data.jobs.filter((j) =>
        (!want.budget || j.budget === want.budget || (j.budget || "").startsWith(want.budget + "/")) &&
        (!want.ns || j.job_id.split("/")[0] === want.ns) && (!term || j.job_id.toLowerCase().includes(term)));
      count.textContent = `${jobs.length} of ${data.jobs.length} managed jobs, planned ${time(data.planned_at)}. Pending jobs first, in the order Nomad places them.`;
      out.replaceChildren(table(["Pos", "Job", "Budget", "Band", ["Nomad priority", "num"], ["Sort metric", "num"],
        ["Served", "num"], "Level fairshare (top › down)", "Waits for / explanation", "ETA / protected until"],
      jobs.map((j) => h("tr", { "data-job": j.job_id },
        td(j.position || "–", "num"), td(jobLink(j.job_id)), td(budgetLink(j.budget)), td(j.band), td(j.priority, "num"),
        td(fmtRatio(j.sort_metric, 4), "num"), td(j.standing ? fmtRatio(j.standing.served_ratio) : "–", "num"),
        td(chain(j.standing)), td(j.explanation),
        td(j.free_at ? "GPUs free at " + time(j.free_at) : j.protected_until ? "protected until " + time(j.protected_until) : "–")))));
    }
    async function refresh() {
      data = await api("queue");
      draw();
    }
    return { refresh };
  }

  function jobPage(params) {
    const id = params.rest;
    const summary = h("div", { id: "job-summary" });
    const why = h("div", { id: "job-why" });
    const events = h("div", { id: "job-events" });
    main.replaceChildren(h("h1", {}, "Job " + id), why, summary, h("h2", {}, "History"), events);
    function standingTable(st) {
      return table(["Level", ["Share S", "num"], ["Usage U", "num"], ["Level fairshare S/U", "num"]],
        st.parts.map((p) => h("tr", {}, td(budgetLink(p.path)), td(pct(p.share), "num"), td(pct(p.usage_fraction), "num"),
          td(fmtRatio(p.level_fairshare), "num"))), { class: "standing" });
    }
    async function refresh() {
      const [j, nodes] = await Promise.all([api("jobs/" + enc(id) + "/history"), api("nodes")]);
      const nodeName = Object.fromEntries(nodes.nodes.map((n) => [n.id, n.name || n.id]));
      const nodeCell = (nid) => (nid ? h("a", { href: "#/decisions?node=" + enc(nid), title: nid }, nodeName[nid] || short(nid)) : "–");
      const qj = j.queue;
      const kv = [["Budget", budgetLink(j.budget)], ["Min runtime", dur(j.min_runtime_ns)], ["Resumable", j.resumable ? "yes" : "no"],
        ["GPUs", j.gpus], ["Submitted", time(j.submitted_at)],
        ["Band", qj ? `${qj.band} (Nomad priority ${qj.priority}, sort metric ${fmtRatio(qj.sort_metric, 4)})` : "not in a plan yet"],
        ["Position", qj && qj.position ? qj.position + " in line" : "–"],
        ["Explanation", qj ? qj.explanation : "–"],
        ["Charged", `${num(j.charged_gpu_hours, 2)} GPU-h over ${j.placements} placements, ${j.requeues} requeues`]];
      if (j.unallocated_reason) kv.splice(1, 0, ["Unallocated", j.unallocated_reason]);
      if (qj && qj.free_at) kv.push(["GPUs free at", time(qj.free_at)]);
      if (qj && qj.protected_until) kv.push(["Protected until", time(qj.protected_until)]);
      const parts = [h("dl", { class: "kv" }, kv.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))];
      if (j.budget_standing_now) {
        const st = j.budget_standing_now;
        parts.push(h("h2", {}, "Fair-share standing of " + j.budget),
          h("p", {}, `#${st.leaf_position} among budgets, most owed first (sort metric ${fmtRatio(st.metric, 4)}); served ${fmtRatio(st.served_ratio)} ` +
            `(usage ${pct(st.usage_share)} of the window, share ${pct(st.effective_share)})`), standingTable(st));
      }
      summary.replaceChildren(...parts);
      // "Why was I preempted": the last stop allot decided, with the job it
      // made room for; a later stop by Nomad is said after it.
      const stops = j.events.filter((e) => e.kind === "stopped" && e.stop_kind !== "ended");
      if (stops.length) {
        const byAllot = stops.filter((e) => e.decision_kind);
        const last = byAllot.length ? byAllot[byAllot.length - 1] : stops[stops.length - 1];
        const bits = [h("strong", {}, `Stopped ${time(last.at)}: ${last.stop_kind}`), " — ", last.reason];
        if (last.for_job) {
          bits.push(h("br"), "It made room for ", jobLink(last.for_job));
          if (last.for_job_budget) bits.push(" of ", budgetLink(last.for_job_budget));
          else bits.push(" (which allot no longer tracks: it finished or left)");
          // The standings recorded with the stop justify it; today's are
          // only a fallback for stops recorded without them.
          const atStop = !!last.for_job_standing_at_stop;
          const a = last.for_job_standing_at_stop || last.for_job_standing_now;
          const b = atStop ? last.standing_at_stop : j.budget_standing_now;
          if (a && last.for_job_budget) {
            bits.push(atStop ? `. When it was stopped, that budget ranked #${a.leaf_position} among budgets, most owed first (served ${fmtRatio(a.served_ratio)})`
              : `: that budget ranks #${a.leaf_position} among budgets now, served ${fmtRatio(a.served_ratio)}`);
            if (b) bits.push(atStop ? `, this job's budget #${b.leaf_position} (served ${fmtRatio(b.served_ratio)}).` : `; this job's budget ranks #${b.leaf_position}, served ${fmtRatio(b.served_ratio)}.`);
          }
        }
        const later = stops.filter((e) => !e.decision_kind && Date.parse(e.at) >= Date.parse(last.at) && e !== last);
        if (later.length) bits.push(h("br"), `Then Nomad preempted ${later.length === 1 ? "its replacement" : later.length + " replacements"} (last ${time(later[later.length - 1].at)}).`);
        why.replaceChildren(h("div", { class: "why", role: "note" }, ...bits));
      } else why.replaceChildren();
      events.replaceChildren(table(["At", "Event", "Kind", "Alloc", "Node", ["GPUs", "num"], "Detail"],
        j.events.map((e) => h("tr", { "data-kind": e.kind },
          td([time(e.at), Date.parse(e.at) > Date.now() ? h("span", { class: "muted" }, " (ahead)") : ""], "nowrap"), td(e.kind), td(e.stop_kind || e.decision_kind || "–", "nowrap"), td(e.alloc_id ? h("span", { title: e.alloc_id }, short(e.alloc_id)) : "–", "nowrap"), td(nodeCell(e.node_id), "nowrap"),
          td(e.gpus || "–", "num"),
          td([e.until && !e.until.startsWith("0001-") ? `protected until ${time(e.until)}. ` : "", e.reason || "",
            e.for_job ? h("span", {}, " (for ", jobLink(e.for_job), ")") : "",
            e.charged_gpu_hours ? ` Charged ${num(e.charged_gpu_hours, 2)} GPU-h.` : ""])))));
    }
    return { refresh };
  }

  function nodesPage() {
    const out = h("div", { id: "nodes-table" });
    const count = h("p", { class: "muted", id: "nodes-count" });
    main.replaceChildren(h("h1", {}, "Nodes"), count, out);
    async function refresh() {
      const nodes = await api("nodes");
      let total = 0, healthy = 0;
      const rows = nodes.nodes.map((n) => {
        total += n.total_gpus; healthy += n.healthy_gpus;
        const lc = n.lifecycle || {};
        const unhealthy = n.healthy_gpus < n.total_gpus;
        const now = Date.now();
        return h("tr", { "data-node": n.id },
          td([h("strong", {}, n.name || n.id), h("br"), h("span", { class: "muted", title: n.id }, short(n.id))], "nowrap"),
          td(`${n.healthy_gpus} / ${n.total_gpus}`, "num"),
          td(gpuList(n)),
          td(unhealthy ? h("span", { class: "bad" }, (lc.cause === "unhealthy" && lc.reason) || n.reason || "unhealthy GPUs")
            : h("span", { class: "ok" }, "healthy")),
          td([lc.phase || "in-service", lc.phase_since ? h("span", { class: "muted" }, " since " + time(lc.phase_since)) : "",
            lc.cause && !unhealthy ? h("div", { class: "muted" }, `${lc.cause}: ${lc.reason || ""}`) : "",
            lc.allocs && lc.allocs.length ? h("div", {}, lc.allocs.map((a) => h("div", {}, jobLink(a.job_id), ` leaves ${time(a.leaves_at)}`))) : ""]),
          td(n.reservation ? [h("span", {}, "reserved for "), jobLink(n.reservation.job),
            h("div", { class: "muted" }, "since " + time(n.reservation.since) + (n.reservation.until ? ", until " + time(n.reservation.until) : ""))] : "–"),
          td((n.running || []).length ? (n.running || []).map((a) => h("div", {}, jobLink(a.job_id), ` ${a.gpus} GPUs, `,
            a.protected_until && Date.parse(a.protected_until) > now ? h("span", {}, "protected until " + time(a.protected_until))
              : h("span", { class: "muted" }, a.budget ? "past its window" : "unallocated"))) : h("span", { class: "muted" }, "idle")));
      });
      count.textContent = `${nodes.nodes.length} GPU nodes, ${healthy} of ${total} GPUs healthy.`;
      out.replaceChildren(table(["Node", ["GPUs healthy", "num"], "GPUs (model, ID, health)", "Health", "Drain phase", "Reservation", "Running (protected until)"], rows));
    }
    return { refresh };
  }

  // gpuList lists a node's GPUs, each with its model, its ID and "healthy"
  // or "unhealthy" with Nomad's reason: the words say it, the colour repeats it.
  function gpuList(n) {
    const gpus = n.gpus || [];
    if (!gpus.length) return h("span", { class: "muted" }, n.total_gpus ? "not listed yet" : "none");
    const items = gpus.map((g) => h("li", { "data-gpu": g.id, "data-healthy": String(g.healthy) },
      h("span", {}, g.model || "unknown model"), " ", h("code", {}, g.id), ": ",
      g.healthy ? h("span", { class: "ok" }, "healthy")
        : h("span", { class: "bad" }, h("strong", {}, "unhealthy"), g.reason ? ": " + g.reason : " (no reason given)")));
    if (gpus.length < n.total_gpus) items.push(h("li", { class: "muted" }, `and ${n.total_gpus - gpus.length} more not listed`));
    return h("ul", { class: "gpus", "aria-label": `GPUs of ${n.name || n.id}` }, items);
  }

  function decisionsPage(params) {
    const q = params.q;
    const kind = h("select", { id: "d-kind" }, ["", "priority", "preempt", "drain", "reserve", "node-transition", "budgets", "plan"]
      .map((k) => h("option", { value: k }, k || "all kinds")));
    kind.value = q.get("kind") || "";
    const job = h("input", { id: "d-job", type: "search", value: q.get("job") || "", placeholder: "namespace/name" });
    const node = h("input", { id: "d-node", type: "search", value: q.get("node") || "", placeholder: "node ID" });
    const budget = h("input", { id: "d-budget", type: "search", value: q.get("budget") || "", placeholder: "budget path" });
    const out = h("div", { id: "decisions-table" });
    const count = h("p", { class: "muted", id: "decisions-count" });
    main.replaceChildren(h("h1", {}, "Decisions"),
      h("form", { class: "controls", role: "search", onsubmit: (e) => { e.preventDefault(); apply(); } },
        h("label", { for: "d-kind" }, "Kind", kind), h("label", { for: "d-job" }, "Job", job),
        h("label", { for: "d-node" }, "Node", node), h("label", { for: "d-budget" }, "Budget (and below)", budget),
        h("button", { type: "submit" }, "Filter")), count, out);
    function apply() {
      const p = new URLSearchParams();
      for (const [k, el] of [["kind", kind], ["job", job], ["node", node], ["budget", budget]]) if (el.value) p.set(k, el.value.trim());
      history.replaceState(null, "", "#/decisions" + (p.toString() ? "?" + p : ""));
      refresh().catch((e) => showError(out, e));
    }
    kind.addEventListener("change", apply);
    async function refresh() {
      const d = await api("decisions", { limit: 500, kind: kind.value, job: job.value.trim(), node: node.value.trim(), budget: budget.value.trim() });
      const ds = d.decisions.slice().reverse();
      count.textContent = `${ds.length} decisions, newest first (at most 500).`;
      out.replaceChildren(table([["Seq", "num"], "At", "Kind", "Job", "Node", "Alloc", "Reason"],
        ds.map((x) => h("tr", { "data-kind": x.kind }, td(x.seq, "num"), td(time(x.at), "nowrap"), td(x.kind, "nowrap"), td(jobLink(x.job_id), "nowrap"),
          td(x.node_id ? h("span", { title: x.node_id }, short(x.node_id)) : "–"),
          td(x.alloc_id ? h("span", { title: x.alloc_id }, short(x.alloc_id)) : "–"), td(x.reason)))));
    }
    return { refresh };
  }

  // ---- router and live refresh -------------------------------------------
  const PAGES = { budgets: budgetsPage, queue: queuePage, job: jobPage, nodes: nodesPage, decisions: decisionsPage };
  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, "") || "budgets";
    const [p, qs] = raw.split("?");
    const slash = p.indexOf("/");
    const page = slash < 0 ? p : p.slice(0, slash);
    const rest = slash < 0 ? "" : decodeURIComponent(p.slice(slash + 1));
    return { page, rest, q: new URLSearchParams(qs || "") };
  }
  let routeSeq = 0;
  async function route() {
    const params = parseHash();
    const make = PAGES[params.page];
    document.querySelectorAll("nav a").forEach((a) => {
      if (a.dataset.page === params.page) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    if (current && current.destroy) current.destroy();
    window.allotCharts = [];
    if (!make) { current = null; main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No page " + params.page + ".")); return; }
    document.title = "allot: " + params.page + (params.rest ? " " + params.rest : "");
    const seq = ++routeSeq;
    window.allotReady = null;
    const started = performance.now();
    current = make(params);
    if ((await load(seq)) && seq === routeSeq) window.allotReady = { page: params.page, ms: performance.now() - started, at: performance.now() };
  }
  async function load(seq) {
    if (!current) return false;
    try {
      staleReads = 0;
      await current.refresh();
      if (seq === undefined || seq === routeSeq) setStatus("updated " + new Date().toISOString().slice(11, 19) + "Z" +
        (staleReads ? " from this server's own copy (no leader reachable)" : "") + (paused ? " · paused" : ` · live, every ${REFRESH_MS / 1000}s`), staleReads > 0);
      return true;
    } catch (err) {
      setStatus("refresh failed: " + err.message, true);
      if (seq !== undefined) showError(main, err);
      return false;
    }
  }
  function schedule() {
    clearInterval(timer);
    if (paused) return;
    timer = setInterval(() => { if (document.visibilityState === "visible") load(); }, REFRESH_MS);
  }
  pauseBtn.addEventListener("click", () => {
    paused = !paused;
    pauseBtn.setAttribute("aria-pressed", String(paused));
    pauseBtn.textContent = paused ? "Resume live refresh" : "Pause live refresh";
    schedule();
    setStatus(statusEl.textContent.replace(/ · .*$/, "") + (paused ? " · paused" : ` · live, every ${REFRESH_MS / 1000}s`));
  });
  // Filters rewrite the fragment with replaceState, which fires no
  // hashchange: only links and the address bar mount a page again.
  window.addEventListener("hashchange", route);
  route();
  schedule();
})();
