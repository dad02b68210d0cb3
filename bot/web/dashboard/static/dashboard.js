// The admin dashboard: charts over days, drawn as inline SVG from /dashboard/api/days.
// Every API call carries Telegram's signed initData (from the URL fragment); all text is inserted
// with textContent, and nothing is loaded from anywhere else.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 640;
  const HEIGHT = 180;
  const PAD = { left: 48, right: 12, top: 10, bottom: 24 };
  const COLORS = ["#2a7ae2", "#e2762a", "#2aa876", "#b23ad1", "#d1453a"];
  const { $, el, status } = window.miniapp;
  const state = { initData: "", days: 30 };
  const api = window.miniapp.signedApi(
    () => state.initData,
    "Your sign-in has expired. Open the dashboard again from /stats.",
  );

  function svg(tag, attributes) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
    return node;
  }

  const formats = {
    count: (v) => String(Math.round(v)),
    dollars: (v) => "$" + (v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toFixed(4)),
    percent: (v) => Math.round(v * 100) + "%",
    ms: (v) => (v >= 1000 ? (v / 1000).toFixed(1) + " s" : Math.round(v) + " ms"),
    seconds: (v) => (v >= 3600 ? (v / 3600).toFixed(1) + " h" : v >= 60 ? (v / 60).toFixed(1) + " min" : Math.round(v) + " s"),
  };

  // A line chart of one or more series over the days; null values are gaps. Each point carries a
  // <title> ("2026-03-02 · people: 3") for a hover and for whoever reads the page without seeing it.
  function lineChart(key, days, series, format) {
    const section = $("chart-" + key);
    const plot = section.querySelector(".plot");
    const legend = section.querySelector(".legend");
    plot.replaceChildren();
    legend.replaceChildren();
    const values = series.flatMap((s) => s.values.filter((v) => v !== null && v !== undefined));
    const top = Math.max(values.length ? Math.max(...values) : 0, 0) || 1;
    const chart = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": section.getAttribute("aria-label") });
    const innerW = WIDTH - PAD.left - PAD.right;
    const innerH = HEIGHT - PAD.top - PAD.bottom;
    const x = (i) => PAD.left + (days.length > 1 ? (i * innerW) / (days.length - 1) : innerW / 2);
    const y = (v) => PAD.top + innerH - (v / top) * innerH;
    for (const tick of [0, 0.5, 1]) {
      const at = y(top * tick);
      chart.appendChild(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: at, y2: at, class: "grid" }));
      const label = svg("text", { x: PAD.left - 6, y: at + 4, class: "axis", "text-anchor": "end" });
      label.textContent = format(top * tick);
      chart.appendChild(label);
    }
    for (const i of [0, days.length - 1]) {
      const label = svg("text", { x: x(i), y: HEIGHT - 6, class: "axis", "text-anchor": i ? "end" : "start" });
      label.textContent = days[i].slice(5);
      chart.appendChild(label);
    }
    series.forEach((s, n) => {
      const color = COLORS[n % COLORS.length];
      let path = "";
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) return;
        const previous = i > 0 ? s.values[i - 1] : null;
        path += (previous === null || previous === undefined ? "M" : "L") + x(i).toFixed(1) + " " + y(v).toFixed(1) + " ";
      });
      if (path) chart.appendChild(svg("path", { d: path.trim(), stroke: color, class: "line" }));
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) return;
        const dot = svg("circle", { cx: x(i), cy: y(v), r: 3, fill: color, class: "point", "data-series": s.name, "data-day": days[i] });
        const title = svg("title");
        title.textContent = `${days[i]} · ${s.name}: ${format(v)}`;
        dot.appendChild(title);
        chart.appendChild(dot);
      });
      const item = el("span", "key", s.name);
      item.style.setProperty("--key", color);
      legend.appendChild(item);
    });
    plot.appendChild(chart);
    const latest = series.map((s) => {
      const last = s.values[s.values.length - 1];
      return last === null || last === undefined ? null : (series.length > 1 ? s.name + " " : "") + format(last);
    }).filter(Boolean);
    $("latest-" + key).textContent = latest.length ? "today: " + latest.join(", ") : "";
  }

  function named(values, names) {
    return Object.entries(values)
      .filter(([, list]) => list.some((v) => v))
      .map(([name, list]) => ({ name: names[name] || name, values: list }));
  }

  // "rate_message_minute" -> "rate limit: message per minute"
  function refusalNames(values) {
    const names = {
      user_daily_tokens: "USER_DAILY_TOKENS", group_daily_tokens: "GROUP_DAILY_TOKENS",
      daily_tokens: "DAILY_TOKENS", not_allowed: "not allowed", strangers: "strangers",
    };
    Object.keys(values).filter((key) => key.startsWith("rate_")).forEach((key) => {
      const parts = key.slice("rate_".length).split("_");
      const window = parts.pop();
      names[key] = "rate limit: " + parts.join(" ") + " per " + window;
    });
    return names;
  }

  function tile(label, value) {
    const box = el("div", "tile");
    box.appendChild(el("span", "value", value));
    box.appendChild(el("span", "label", label));
    return box;
  }

  function showNow(now) {
    const lag = now.job_lag_seconds || {};
    $("now").replaceChildren(
      tile("updates waiting", (now.inbox.pending || 0) + (now.inbox.replying || 0)),
      tile("oldest waiting", formats.seconds(now.oldest_wait_seconds || 0)),
      tile("post-processing lag", formats.seconds(lag.postprocess || 0)),
      tile("follow-up lag", formats.seconds(lag.touchpoints || 0)),
      tile("imported conversations waiting", now.imports_waiting || 0),
    );
  }

  function draw(data) {
    const days = data.days;
    showNow(data.now);
    lineChart("active", days, [
      { name: "people", values: data.active.people },
      { name: "groups", values: data.active.groups },
    ], formats.count);
    lineChart("turns", days, [{ name: "turns", values: data.turns }], formats.count);
    lineChart("cost", days, [
      { name: "billed", values: data.cost.billed },
      { name: "uncached", values: data.cost.uncached },
      // Imported conversations' post-processing, apart from chat.
      { name: "imports", values: data.imports.billed },
    ], formats.dollars);
    lineChart("cache", days, [{ name: "read from cache", values: data.cache_read_share }], formats.percent);
    lineChart("latency", days, [{ name: "p95", values: data.p95_turn_ms }], formats.ms);
    const refusals = named(data.refusals, refusalNames(data.refusals));
    lineChart("refusals", days, refusals.length ? refusals : [{ name: "refusals", values: days.map(() => 0) }], formats.count);
    const lags = Object.entries(data.p95_job_lag_seconds).map(([name, values]) => ({ name, values }));
    lineChart("lag", days, lags, formats.seconds);
    const unpriced = data.cost.unpriced_models;
    status(unpriced.length ? "No price known for " + unpriced.join(", ") + ": its use is not in the cost." : "");
    document.body.dataset.loaded = data.generated_at;
  }

  async function load() {
    status("Loading…");
    try {
      draw(await api("/dashboard/api/days?days=" + state.days));
    } catch (error) {
      status(error.message);
    }
  }

  function main() {
    const launch = window.miniapp.launchParams("dashboard");
    state.initData = launch.get("tgWebAppData") || "";
    $("period").onchange = (event) => {
      state.days = Number(event.target.value);
      load();
    };
    if (state.initData) {
      load();
    } else {
      status("Open the dashboard from /stats in your chat with " + (document.body.dataset.persona || "the bot") + ".");
    }
  }

  main();
})();
