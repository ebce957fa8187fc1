import Foundation

/// The dashboard's one page: HTML, CSS and a small script that draws `JobView`s with
/// hand-written SVG. Live on the coordinator (`/`: data from `/api/events`, Server-Sent
/// Events) or as a self-contained report file (the data embedded): one renderer for both,
/// no network fetch, nothing from a CDN. Every string from the journal goes into the page
/// as text (`textContent`), never as markup.
public enum DashboardPage {
    /// The live page (served by the coordinator).
    public static var live: String { page(title: "Tessera", data: nil) }

    /// A report: the page with `data` (a JSON object: `{"jobs": [JobView], "workers": [],
    /// "report": {...}}`) embedded.
    public static func report(title: String, data: Data) -> String {
        // Inside <script>, "</" would end the element: JSON allows "<\/".
        let json = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "</", with: "<\\/")
        return page(title: title, data: json)
    }

    static func page(title: String, data: String?) -> String {
        let escapedTitle = title.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escapedTitle)</title><link rel="icon" href="data:,">
        <style>\(css)</style></head>
        <body><header><h1>\(escapedTitle)</h1><span id="status"></span></header>
        <main>
        <section id="jobs-section"><h2>Jobs</h2>
        <label>state <select id="filter"><option value="">all</option><option>running</option><option>queued</option>
        <option>succeeded</option><option>failed</option><option>cancelled</option></select></label>
        <table id="jobs"><thead><tr><th>job</th><th>state</th><th>progress</th><th>queued</th><th>priority</th><th>files/s</th><th>MB/s</th><th>ETA</th></tr></thead><tbody></tbody></table></section>
        <section id="job"></section>
        <section id="workers-section"><h2>Workers</h2><table id="workers"><thead><tr><th>worker</th><th>state</th><th>running</th><th>current task</th><th>done</th><th>peak RSS</th><th>RSS (last minute)</th><th>CPU %</th></tr></thead><tbody></tbody></table></section>
        <section id="report-section"></section>
        </main>
        \(data.map { "<script id=\"data\" type=\"application/json\">\($0)</script>" } ?? "")
        <script>\(script)</script>
        </body></html>
        """
    }

    static let css = """
    body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
    header{background:#223;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:baseline}
    h1{font-size:18px;margin:0}h2{font-size:15px;margin:16px 0 6px}h3{font-size:14px;margin:12px 0 4px}
    main{padding:0 16px 24px}table{border-collapse:collapse;background:#fff;margin:4px 0}
    td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
    th{font-weight:600;background:#f0f0f4}tr.selected{background:#eef}tr[data-job]{cursor:pointer}
    .bar{display:inline-block;width:160px;height:10px;background:#ddd;position:relative}
    .bar span{position:absolute;left:0;top:0;bottom:0;background:#4a7}
    .bar span.failed{background:#c44}.grid{display:flex;flex-wrap:wrap;gap:24px}
    svg text{font-size:10px;fill:#444}svg text.value{fill:#234}p.empty{color:#666;margin:4px 0}.num{text-align:right;font-variant-numeric:tabular-nums}
    .state-failed{color:#b22}.state-lost{color:#b22}img.preview{max-width:96px;max-height:96px}
    button{margin-right:8px}
    """

    static let script = #"""
    "use strict";
    const $ = (s) => document.querySelector(s);
    function el(tag, attrs, ...children) {
      const e = document.createElement(tag);
      for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
      for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
      return e;
    }
    function svg(tag, attrs) {
      const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
      for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
      return e;
    }
    const fmt = (n, d = 1) => (n == null || !isFinite(n)) ? "" : Number(n).toFixed(d);
    // Decimal units, as the command line prints them (1 MB = 1,000,000 bytes).
    const bytes = (n) => n >= 1e9 ? fmt(n / 1e9) + " GB" : n >= 1e6 ? fmt(n / 1e6) + " MB" : n >= 1e3 ? fmt(n / 1e3) + " kB" : n + " B";
    const eta = (s) => s == null ? "" : s < 60 ? fmt(s, 0) + " s" : fmt(s / 60, 1) + " min";
    let state = { jobs: [], workers: [] }, selected = null;

    function progress(j) {
      const p = j.total ? 100 * (j.succeeded + j.failed + j.skipped + j.cancelled) / j.total : 0;
      const bar = el("span", { class: "bar" }, el("span", { style: "width:" + p.toFixed(1) + "%" + (j.failed ? ";background:#c84" : "") }));
      return el("span", { class: "progress", "data-percent": p.toFixed(1) }, bar, " " + fmt(p, 0) + " % (" + (j.succeeded + j.failed + j.skipped + j.cancelled) + "/" + j.total + ")");
    }

    function drawJobs() {
      const body = $("#jobs tbody"), filter = $("#filter").value;
      body.replaceChildren();
      for (const j of state.jobs) {
        if (filter && j.state !== filter) continue;
        const row = el("tr", { "data-job": j.id, class: j.id === selected ? "selected" : "" },
          el("td", {}, j.name, el("br"), el("small", {}, j.id)), el("td", { class: "state-" + j.state }, j.state),
          el("td", {}, progress(j)), el("td", { class: "num" }, j.queued), el("td", { class: "num" }, j.priority),
          el("td", { class: "num" }, fmt(j.filesPerSecond)), el("td", { class: "num" }, fmt(j.megabytesPerSecond)),
          el("td", { class: "num" }, eta(j.etaSeconds)));
        row.onclick = () => { selected = j.id; draw(); };
        body.append(row);
      }
    }

    // Compact numbers for axis labels: 1, 512, 1k, 16k, 1M.
    const compact = (n) => n >= 1e6 ? fmt(n / 1e6, n % 1e6 ? 1 : 0) + "M" : n >= 1e3 ? fmt(n / 1e3, n % 1e3 ? 1 : 0) + "k" : String(n);

    // A bar chart with its axes: the y axis' top value, each bar's value above it (when the
    // bars are wide enough) and x labels thinned so that none is clipped or overlaps.
    function barChart(cls, values, labels, w = 360, h = 120, unit = "") {
      const left = 44, bottom = 18, top = 12, plotW = w - left - 4, plotH = h - top - bottom;
      const s = svg("svg", { class: cls, width: w, height: h, viewBox: `0 0 ${w} ${h}` });
      const max = Math.max(1, ...values), bw = plotW / Math.max(1, values.length);
      s.append(svg("line", { class: "axis", x1: left, y1: top + plotH, x2: w - 4, y2: top + plotH, stroke: "#888" }),
        svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + plotH, stroke: "#888" }));
      const yTop = svg("text", { class: "axis y", x: left - 4, y: top + 4, "text-anchor": "end" }); yTop.textContent = compact(max) + unit;
      const yZero = svg("text", { class: "axis y", x: left - 4, y: top + plotH, "text-anchor": "end" }); yZero.textContent = "0";
      s.append(yTop, yZero);
      // At most 6.5 px a character at 10 px. Labels that are words (stages) each get theirs,
      // turned to fit under narrow bars; numeric ones (buckets) every k-th, so that each has room.
      const longest = Math.max(1, ...labels.map((l) => String(l).length));
      const words = labels.every((l) => /^[a-zA-Z]/.test(String(l)));
      const turned = words && longest * 6.5 + 4 > bw;
      const every = words ? 1 : Math.max(1, Math.ceil((longest * 6.5 + 4) / bw));
      if (turned) {  // room under the axis for the turned labels
        const extra = Math.ceil(longest * 6.5 * 0.6);
        s.setAttribute("height", h + extra); s.setAttribute("viewBox", `0 0 ${w} ${h + extra}`);
      }
      values.forEach((v, i) => {
        const bh = plotH * v / max, x = left + i * bw;
        const r = svg("rect", { x: x + 1, y: top + plotH - bh, width: Math.max(1, bw - 2), height: bh, fill: "#58a" });
        const t = svg("title"); t.textContent = labels[i] + ": " + v + unit; r.append(t); s.append(r);
        if (bw >= 18 && v > 0) {
          const n = svg("text", { class: "value", x: x + bw / 2, y: top + plotH - bh - 2, "text-anchor": "middle" });
          n.textContent = compact(v); s.append(n);
        }
        if (turned) {
          // Turned 35°, its end under its bar.
          const l = svg("text", { class: "axis x turned", x: x + bw / 2 + 3, y: top + plotH + 10, "text-anchor": "end",
                                  transform: `rotate(-35 ${x + bw / 2 + 3} ${top + plotH + 10})` });
          l.textContent = labels[i]; s.append(l);
        } else if (i % every === 0) {
          // Centred under its bar, or held inside the chart at either end.
          const half = String(labels[i]).length * 3.25, mid = x + bw / 2;
          const [lx, anchor] = mid + half > w - 1 ? [w - 1, "end"] : mid - half < 0 ? [0, "start"] : [mid, "middle"];
          const l = svg("text", { class: "axis x", x: lx, y: h - 5, "text-anchor": anchor });
          l.textContent = labels[i]; s.append(l);
        }
      });
      return s;
    }

    // Tasks finished per interval, with its axes: the busiest interval's count and the time span.
    function timeline(j, w = 360, h = 120) {
      const left = 44, bottom = 18, top = 8, plotW = w - left - 8, plotH = h - top - bottom;
      const s = svg("svg", { class: "timeline", width: w, height: h, viewBox: `0 0 ${w} ${h}` });
      const v = j.timeline, max = Math.max(1, ...v);
      s.append(svg("line", { class: "axis", x1: left, y1: top + plotH, x2: w - 4, y2: top + plotH, stroke: "#888" }),
        svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + plotH, stroke: "#888" }));
      const label = (text, x, y, anchor) => { const t = svg("text", { class: "axis", x, y, "text-anchor": anchor }); t.textContent = text; s.append(t); };
      label(String(max), left - 4, top + 8, "end");
      label("0", left - 4, top + plotH, "end");
      label("0 s", left, h - 5, "start");
      label(fmt(v.length * j.timelineSeconds, v.length * j.timelineSeconds >= 10 ? 0 : 1) + " s", w - 6, h - 5, "end");
      const pts = v.map((c, i) => `${(left + (v.length > 1 ? i * plotW / (v.length - 1) : 0)).toFixed(1)},${(top + plotH - plotH * c / max).toFixed(1)}`);
      s.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: "#4a7", "stroke-width": 2, "data-points": v.length }));
      if (v.length <= 60) for (const p of pts) { const [x, y] = p.split(","); s.append(svg("circle", { cx: x, cy: y, r: 2.5, fill: "#4a7" })); }
      return s;
    }

    // A table, or a line saying there is nothing to show (never headers over no rows).
    function table(cls, head, rows, none = "none") {
      if (!rows.length) return el("p", { class: cls + " empty" }, none);
      return el("table", { class: cls }, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows.map((r) => el("tr", r.attrs || {}, ...r.cells.map((c) => el("td", {}, c))))));
    }

    // Live: the job selected (the first at start); a report of several runs: each in turn.
    function drawJob() {
      const box = $("#job"); box.replaceChildren();
      const j = state.jobs.find((x) => x.id === selected) || state.jobs[0];
      if (!j) return;
      selected = j.id;
      for (const one of state.report ? state.jobs : [j]) {
        const part = el("section", { class: "job-detail", "data-job": one.id });
        drawOneJob(one, part);
        box.append(part);
      }
    }

    function drawOneJob(j, box) {
      box.append(el("h2", {}, "Job " + j.name + " (" + j.id + ")"),
        el("p", {}, `${j.succeeded} ok, ${j.failed} failed, ${j.skipped} skipped, ${j.cancelled} cancelled, ${j.running} running of ${j.total}; `
          + `${fmt(j.filesPerSecond)} files/s, ${fmt(j.megabytesPerSecond)} MB/s; ${bytes(j.bytesIn)} in, ${bytes(j.bytesOut)} out`
          + (j.bytesIn > j.bytesOut ? ` (${bytes(j.bytesIn - j.bytesOut)} saved)` : "")));
      const grid = el("div", { class: "grid" });
      const stages = j.stages.filter((x) => x.stage !== "queueWait");
      grid.append(el("div", {}, el("h3", {}, "Stages (share of task time; p50 / p95 ms)"),
        table("stages", ["stage", "share", "p50", "p95"], j.stages.map((x) => ({ attrs: { "data-stage": x.stage },
          cells: [x.stage, x.stage === "queueWait" ? "" : fmt(100 * x.share) + " %", fmt(x.p50, 2), fmt(x.p95, 2)] })))),
        el("div", {}, el("h3", {}, "Share of task time"), barChart("stage-shares", stages.map((x) => Math.round(1000 * x.share) / 10), stages.map((x) => x.stage), 360, 120, "%")),
        el("div", {}, el("h3", {}, "Task times (succeeded, ms)"), barChart("histogram", j.taskTimes.map((b) => b.count), j.taskTimes.map((b) => "≤" + compact(b.upTo)))),
        el("div", {}, el("h3", {}, `Finished per ${j.timelineSeconds} s`), timeline(j)));
      box.append(grid);
      if (j.actions && !state.report) {
        const act = (path, confirmText) => async () => {
          if (confirmText && !confirm(confirmText)) return;
          let token = sessionStorage.getItem("tessera-token") || prompt("Dashboard token");
          if (!token) return;
          const r = await fetch(path, { method: "POST", headers: { Authorization: "Bearer " + token } });
          if (r.status === 403) sessionStorage.removeItem("tessera-token"); else sessionStorage.setItem("tessera-token", token);
          $("#status").textContent = (await r.text()).trim();
        };
        const id = encodeURIComponent(j.id), buttons = el("p", { class: "actions" });
        if (j.state === "running" || j.state === "queued") {
          const b = el("button", { id: "cancel" }, "Cancel job"); b.onclick = act("api/cancel?job=" + id, "Cancel job " + j.name + "?"); buttons.append(b);
        }
        if (j.failed > 0 && j.state !== "running" && j.state !== "queued") {
          const b = el("button", { id: "retry-failed" }, `Retry ${j.failed} failed`);
          b.onclick = act("api/retry-failed?job=" + id, `Run the ${j.failed} failed tasks of ${j.name} again?`); buttons.append(b);
        }
        box.append(buttons);
      }
      if (j.stuck && j.stuck.length) {
        box.append(el("h3", {}, `Stuck tasks (running over ${fmt(Math.max(10, 3 * j.p95TaskMilliseconds / 1000), 0)} s, or on a silent worker)`),
          table("stuck", ["task", "input", "worker", "seconds", "why", ""], j.stuck.map((t) => {
            const cell = el("span");
            if (j.actions && !state.report) {
              const b = el("button", {}, "Requeue");
              b.onclick = async () => {
                const token = sessionStorage.getItem("tessera-token") || prompt("Dashboard token");
                if (!token) return;
                const r = await fetch(`api/requeue?job=${encodeURIComponent(j.id)}&task=${t.task}`, { method: "POST", headers: { Authorization: "Bearer " + token } });
                $("#status").textContent = (await r.text()).trim();
              };
              cell.append(b);
            }
            return { attrs: { "data-task": t.task }, cells: [t.task, t.input, t.worker, fmt(t.seconds, 0), t.reason, cell] };
          })));
      }
      box.append(el("h3", {}, "Failures by reason"), table("failures", ["code", "count", "examples"], j.failures.map((f) => ({
        attrs: { "data-code": f.code }, cells: [f.code, f.count, el("div", {}, ...f.examples.map((e) => el("div", {}, e[1])))] })), "No failures."));
      box.append(el("h3", {}, "Slowest tasks"), table("slowest", ["input", "ms", "worker"], j.slowest.map((t) => ({ cells: [t.input, fmt(t.milliseconds), t.worker] })), "No task finished yet."));
      // Rows in an order that does not change between updates: most first, ties by name;
      // DCT scales by scale (1/8, 2/8, 4/8, 8/8).
      const counts = (o) => Object.entries(o).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([k, v]) => ({ attrs: { "data-key": k }, cells: [k, v] }));
      const eighths = (k) => { const m = /^(\d+)\/8$/.exec(k); return m ? +m[1] : 99; };
      const scaleRows = Object.entries(j.scales).sort((a, b) => eighths(a[0]) - eighths(b[0]) || (a[0] < b[0] ? -1 : 1))
        .map(([k, v]) => ({ attrs: { "data-key": k }, cells: [k, v] }));
      box.append(el("div", { class: "grid" },
        el("div", {}, el("h3", {}, "Decode paths"), table("decode-paths", ["path", "tasks"], counts(j.decodePaths))),
        el("div", {}, el("h3", {}, "DCT scales"), table("scales", ["scale", "tasks"], scaleRows)),
        el("div", {}, el("h3", {}, "Peak memory by worker"), table("job-workers", ["worker", "tasks", "peak RSS"], j.workers.map((w) => ({ cells: [w.worker, w.tasks, bytes(w.peakRSSBytes)] })))),
        el("div", {}, el("h3", {}, "Latest outputs"), table("latest", ["output"], j.latestOutputs.map((p) => {
          // Live: a small preview, served from the job's output root only.
          const cell = el("div", {}, p);
          if (!state.report && /\.(jpe?g|png|webp|avif)$/i.test(p) && p.startsWith("/")) {
            cell.prepend(el("img", { class: "preview", loading: "lazy", alt: "", src: "api/output?job=" + encodeURIComponent(j.id) + "&path=" + encodeURIComponent(p) }), el("br"));
          }
          return { cells: [cell] };
        })))));
    }

    function sparkline(cls, values, max, w = 90, h = 20) {
      const s = svg("svg", { class: "spark " + cls, width: w, height: h });
      if (values && values.length > 1) {
        const top = Math.max(max || 0, ...values, 1);
        s.append(svg("polyline", { fill: "none", stroke: "#58a", "data-points": values.length,
          points: values.map((v, i) => `${(i * w / (values.length - 1)).toFixed(1)},${(h - 1 - (h - 2) * v / top).toFixed(1)}`).join(" ") }));
      }
      return s;
    }

    function drawWorkers() {
      const body = $("#workers tbody"); body.replaceChildren();
      for (const w of state.workers) {
        const cpu = w.cpuHistory || [];
        body.append(el("tr", { "data-worker": w.id, class: "state-" + w.state },
          el("td", {}, w.id, el("br"), el("small", {}, w.host)), el("td", {}, w.state), el("td", { class: "num" }, w.running),
          el("td", {}, ...(w.current || []).map((c) => el("div", {}, c))), el("td", { class: "num" }, w.completed), el("td", { class: "num" }, bytes(w.peakRSSBytes || 0)),
          el("td", { class: "num" }, sparkline("rss", w.rssHistory), " ", w.rssBytes ? bytes(w.rssBytes) : ""),
          el("td", { class: "num" }, sparkline("cpu", cpu, 100), " ", cpu.length ? fmt(cpu[cpu.length - 1], 0) : "")));
      }
      $("#workers-section").hidden = state.report !== undefined;
    }

    function drawReport() {
      const r = state.report, box = $("#report-section");
      if (!r) return;
      box.replaceChildren(el("h2", {}, "Run"), table("run", ["", ""], Object.entries(r).filter(([k]) => k !== "jobFile").map(([k, v]) => ({ cells: [k, String(v)] }))));
      if (r.jobFile) box.append(el("h3", {}, "Job file"), el("pre", {}, r.jobFile));
      if (state.jobs.length > 1) {
        const runs = state.jobs, stage = (j, name, k) => (j.stages.find((x) => x.stage === name) || {})[k];
        const rows = [
          ["files/s", (j) => fmt(j.filesPerSecond)], ["MB/s", (j) => fmt(j.megabytesPerSecond)],
          ["task p95 ms", (j) => fmt(j.p95TaskMilliseconds)], ["succeeded", (j) => j.succeeded], ["failed", (j) => j.failed],
          ["bytes in", (j) => bytes(j.bytesIn)], ["bytes out", (j) => bytes(j.bytesOut)],
          ["peak RSS (max worker)", (j) => bytes(Math.max(0, ...j.workers.map((w) => w.peakRSSBytes)))],
          ...runs[0].stages.filter((x) => x.stage !== "queueWait").map((x) => [x.stage + " p50 / p95 ms", (j) => fmt(stage(j, x.stage, "p50"), 2) + " / " + fmt(stage(j, x.stage, "p95"), 2)]),
          ["failures", (j) => j.failures.map((f) => f.code + " ×" + f.count).join(", ")],
        ];
        box.append(el("h2", {}, "Runs compared"), table("compare", ["", ...runs.map((j) => j.name)],
          rows.map(([label, f]) => ({ attrs: { "data-row": label }, cells: [label, ...runs.map(f)] }))));
      }
    }

    function draw() { drawJobs(); drawJob(); drawWorkers(); drawReport(); }
    $("#filter").onchange = draw;

    const embedded = document.getElementById("data");
    if (embedded) {
      state = JSON.parse(embedded.textContent);
      $("#status").textContent = "report, " + (state.report && state.report.generated || "");
      draw();
    } else {
      const source = new EventSource("api/events");
      let updates = 0;
      source.onmessage = (e) => { state = JSON.parse(e.data); $("#status").textContent = "live, update " + (++updates) + " at " + new Date().toLocaleTimeString(); draw(); };
      source.onerror = () => { $("#status").textContent = "disconnected; retrying"; };
    }
    """#
}
