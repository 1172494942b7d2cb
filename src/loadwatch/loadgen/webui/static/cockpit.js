// The LLM tab's charts over time: client latency and throughput beside the engine's state, drawn
// with ECharts (the library of Locust's own charts) under the tab's table, in Locust's theme.
// The history lives on the master (/loadwatch/history): a reloaded page gets it back, and each
// poll asks only for the points it has not seen.
(function () {
  "use strict";
  const POLL_MS = 1000;
  const MAX_POINTS = 3600;
  const TABLE_HEADER = "Scenario (model) or replica";
  const state = { points: [], stages: [], slowest: [], engineUrl: null, last: null, charts: {}, dark: null, box: null };
  window.loadwatchCockpit = state; // for tests and the curious

  const eng = (key, scale) => (p) => (p.engine && p.engine.up && p.engine[key] != null ? p.engine[key] * (scale || 1) : null);
  const CHARTS = [
    { id: "ttft", title: "Time to first token (ms)", series: [
      ["client p50", (p) => p.ttft_p50], ["client p99", (p) => p.ttft_p99], ["engine mean", eng("ttft_ms")]] },
    { id: "tpot", title: "Time per output token and inter-token latency (ms)", series: [
      ["TPOT p50", (p) => p.tpot_p50], ["TPOT p99", (p) => p.tpot_p99], ["ITL p50", (p) => p.itl_p50],
      ["ITL p99", (p) => p.itl_p99]] },
    { id: "throughput", title: "Output tokens/s", series: [["output tok/s", (p) => p.output_tps]] },
    { id: "load", title: "Users and requests in flight", series: [
      ["users", (p) => p.users], ["in flight", (p) => p.in_flight]] },
    { id: "failures", title: "Failures/s by reason", series: "failures" },
    // Refusals apart from failures: the client's count beside the engine's own (vllm:admission_rejections).
    { id: "rejections", title: "Rejected by admission control (/s)", series: [
      ["client", (p) => p.rejected_per_s], ["engine", eng("rejections_per_s")]] },
    { id: "lag", title: "Open loop and trace replay: schedule lag, mean (ms)", series: [
      ["sent after its time by", (p) => p.lag_ms]] },
    { id: "kv", title: "Engine: KV cache usage (%)", engine: true, series: [
      ["usage", eng("kv", 100)], ["peak", null]] },
    { id: "queue", title: "Engine: requests running, and waiting by reason", engine: true, series: [
      ["running", eng("running")], ["waiting", eng("waiting")], ["waiting for capacity", eng("waiting_capacity")],
      ["waiting, deferred", eng("waiting_deferred")]] },
    { id: "ratios", title: "Engine: prompt tokens from cache, prefix-cache hits, spec-decode acceptance (%)",
      engine: true, series: [
      ["prompt tokens from cache", eng("prompt_cached_share", 100)], ["prefix-cache hits", eng("prefix_hit_ratio", 100)],
      ["spec-decode acceptance", eng("spec_acceptance", 100)]] },
    // A server of several data-parallel ranks: each rank's own lines (its totals above hide a rank that
    // queues while another has room). Hidden on a server of one rank.
    { id: "ranks", title: "Engine: each data-parallel rank, running and waiting", engine: true, series: "ranks" },
    { id: "rank_kv", title: "Engine: each data-parallel rank, KV cache usage (%)", engine: true, series: "rank_kv" },
  ];

  function isDark() {
    // Locust's own rule (its theme switch writes localStorage.theme).
    return localStorage.theme === "dark" ||
      (!("theme" in localStorage) && window.matchMedia("(prefers-color-scheme: dark)").matches);
  }

  function llmTable() {
    return Array.from(document.querySelectorAll("table")).find((t) => t.textContent.includes(TABLE_HEADER));
  }

  function ensureBox() {
    const table = llmTable();
    if (!table) return null;
    const anchor = table.closest(".MuiTableContainer-root") || table;
    if (state.box && state.box.isConnected && state.box.previousElementSibling === anchor) return state.box;
    const box = document.createElement("div");
    box.id = "loadwatch-charts";
    box.innerHTML = '<p id="loadwatch-engine-status" style="margin:16px 0 4px;font-family:inherit"></p>' +
      '<div id="loadwatch-grid" style="display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px"></div>' +
      '<div id="loadwatch-slowest" style="margin:16px 0;font-family:inherit"></div>';
    anchor.after(box);
    state.box = box;
    state.charts = {};
    state.dark = null;
    return box;
  }

  function initCharts(box) {
    const dark = isDark();
    if (state.dark === dark && Object.keys(state.charts).length) return;
    Object.values(state.charts).forEach((c) => c.dispose());
    const grid = box.querySelector("#loadwatch-grid");
    grid.innerHTML = "";
    state.charts = {};
    for (const chart of CHARTS) {
      const div = document.createElement("div");
      div.className = "loadwatch-chart";
      div.dataset.chart = chart.id;
      div.style.height = "280px";
      grid.appendChild(div);
      state.charts[chart.id] = echarts.init(div, dark ? "dark" : null);
    }
    state.dark = dark;
  }

  function downSpans() {
    // Stretches where the engine could not be read or was reported down: shaded, never zeros.
    const spans = [];
    let start = null;
    for (const p of state.points) {
      const down = p.engine && !p.engine.up;
      if (down && start === null) start = p.t;
      if (!down && start !== null) { spans.push([start, p.t]); start = null; }
    }
    if (start !== null) spans.push([start, state.points[state.points.length - 1].t]);
    return spans.map(([a, b]) => [{ xAxis: a * 1000, name: "engine down" }, { xAxis: b * 1000 }]);
  }

  function seriesOf(chart) {
    if (chart.series === "failures") {
      const reasons = new Set();
      state.points.forEach((p) => Object.keys(p.failures || {}).forEach((r) => reasons.add(r)));
      if (!reasons.size) return [["none", () => 0]];
      return Array.from(reasons).sort().map((r) => [r, (p) => (p.failures && p.failures[r]) || 0]);
    }
    if (chart.series === "ranks" || chart.series === "rank_kv") {
      const ranks = new Set();
      state.points.forEach((p) => Object.keys((p.engine && p.engine.up && p.engine.ranks) || {}).forEach((r) => ranks.add(r)));
      const of = (r, key, scale) => (p) => {
        const rank = p.engine && p.engine.up && p.engine.ranks ? p.engine.ranks[r] : null;
        return rank && rank[key] != null ? rank[key] * scale : null;
      };
      return Array.from(ranks).sort().flatMap((r) => (chart.series === "rank_kv" ? [[`rank ${r}`, of(r, "kv", 100)]]
        : [[`rank ${r} running`, of(r, "running", 1)], [`rank ${r} waiting`, of(r, "waiting", 1)]]));
    }
    if (chart.id === "kv") {
      let peak = null;
      const peakOf = (p) => {
        const reported = eng("kv_peak", 100)(p);
        const now = eng("kv", 100)(p);
        if (now !== null) peak = Math.max(peak === null ? 0 : peak, now, reported === null ? 0 : reported);
        return p.engine && p.engine.up ? peak : null;
      };
      return [chart.series[0], ["peak", peakOf]];
    }
    return chart.series;
  }

  function draw() {
    const marks = state.stages.map((s) => ({ xAxis: s.t * 1000, label: { formatter: s.name, position: "insideEndTop" } }));
    const down = downSpans();
    const first = state.points.length ? state.points[0].t * 1000 : null;
    const last = state.points.length ? state.points[state.points.length - 1].t * 1000 : null;
    for (const chart of CHARTS) {
      const lines = seriesOf(chart);
      state.charts[chart.id].getDom().style.display = lines.length ? "" : "none";
      if (!lines.length) continue;
      const series = lines.map(([name, value], i) => ({
        name, type: "line", showSymbol: false, connectNulls: false,
        data: state.points.map((p) => [p.t * 1000, value(p)]),
        ...(i === 0 ? {
          markLine: { symbol: "none", silent: true, lineStyle: { type: "dashed", opacity: 0.6 }, data: marks },
          markArea: chart.engine ? { silent: true, itemStyle: { color: "rgba(255, 80, 80, 0.15)" }, data: down } : undefined,
        } : {}),
      }));
      state.charts[chart.id].setOption({
        backgroundColor: "transparent",
        title: { text: chart.title, textStyle: { fontSize: 14 } },
        tooltip: { trigger: "axis" },
        legend: { top: 24 },
        grid: { top: 64, left: 56, right: 24, bottom: 32 },
        // One time axis for every chart: the engine's series start later than the client's.
        xAxis: { type: "time", min: first, max: last },
        yAxis: { type: "value", min: 0 },
        series,
      }, { replaceMerge: ["series"] });
    }
    const status = state.box.querySelector("#loadwatch-engine-status");
    const latest = state.points.length ? state.points[state.points.length - 1].engine : null;
    status.textContent = !state.engineUrl
      ? "Engine: not watched (start Locust with --engine-metrics URL: the sidecar's or vLLM's /metrics)"
      : latest && latest.up ? `Engine: ${state.engineUrl}, up`
        : `Engine: ${state.engineUrl}, DOWN${latest && latest.error ? " (" + latest.error + ")" : ""}`;
  }

  // The slowest of the latest requests, each with the part of its TTFT furthest above the median
  // (the request's id is its X-Request-Id: `loadwatch explain RUN ID` tells its whole story).
  function drawSlowest() {
    const box = state.box.querySelector("#loadwatch-slowest");
    box.replaceChildren();
    if (!state.slowest.length) return;
    const title = document.createElement("p");
    title.textContent = "Slowest recent requests by TTFT, and what made each slow";
    const table = document.createElement("table");
    table.id = "loadwatch-slowest-table";
    table.style.borderCollapse = "collapse";
    const rows = [["request id", "scenario", "TTFT (ms)", "E2E (ms)", "the part furthest above the median"]].concat(
      state.slowest.map((r) => [r.id, r.scenario, r.ttft_ms.toFixed(1), r.e2e_ms.toFixed(1),
        `${r.cause}: ${r.cause_ms.toFixed(1)} ms (median ${r.median_ms.toFixed(1)} ms)`]));
    rows.forEach((cells, i) => {
      const tr = table.insertRow();
      cells.forEach((text) => {
        const cell = document.createElement(i ? "td" : "th");
        cell.textContent = text;  // text, never markup: scenario names come from locustfiles
        cell.style.padding = "2px 12px 2px 0";
        cell.style.textAlign = "left";
        tr.appendChild(cell);
      });
    });
    box.append(title, table);
  }

  async function poll() {
    try {
      const query = state.last === null ? "" : `?since=${state.last}`;
      const response = await fetch(`./loadwatch/history${query}`);
      if (response.ok) {
        const body = await response.json();
        state.engineUrl = body.engine_url;
        state.stages = body.stages;
        state.slowest = body.slowest || [];
        state.points = state.points.concat(body.points).slice(-MAX_POINTS);
        if (state.points.length) state.last = state.points[state.points.length - 1].t;
      }
      const box = ensureBox();
      if (box) {
        initCharts(box);
        draw();
        drawSlowest();
      }
    } catch (error) {
      console.warn("loadwatch charts:", error);
    }
    setTimeout(poll, POLL_MS);
  }

  window.addEventListener("resize", () => Object.values(state.charts).forEach((c) => c.resize()));
  poll();
})();
