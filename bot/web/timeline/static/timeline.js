// The timeline Mini App: day selector, summary card, folded timeline, search and "open"; what the
// bot remembers is memory.js.
// Every API call carries Telegram's signed initData; all text is inserted with textContent.
"use strict";

(function () {
  const { $, el, status } = window.miniapp;
  const launch = window.miniapp.launchParams("timeline");
  const insideTelegram = launch.has("tgWebAppPlatform") || launch.has("tgWebAppVersion");
  const persona = document.body.dataset.persona || "";
  const state = { initData: "", today: "", yesterday: "", days: new Map(), day: "", userName: "", month: null };
  const api = window.miniapp.signedApi(
    () => state.initData,
    "Your sign-in has expired or is not valid. Close the timeline and open it again from the chat.",
  );

  function loadTelegramScript() {
    // Only inside Telegram, and never required: the page works from the URL fragment alone.
    const script = document.createElement("script");
    script.src = "https://telegram.org/js/telegram-web-app.js";
    script.onload = function () {
      const app = window.Telegram && window.Telegram.WebApp;
      if (!app) return;
      app.ready();
      app.expand();
      if (!state.initData && app.initData) {
        state.initData = app.initData;
        start();
      }
    };
    document.head.appendChild(script);
  }

  function dayTitle(day) {
    if (day === state.today) return "Today";
    if (day === state.yesterday) return "Yesterday";
    const [y, m, d] = day.split("-").map(Number);
    return new Date(Date.UTC(y, m - 1, d)).toLocaleDateString(undefined, {
      weekday: "short", day: "numeric", month: "short", year: "numeric", timeZone: "UTC",
    });
  }

  // `said`: a line's own speaker (a group member, or "ChatGPT" for a chat the person imported).
  function speaker(role, said) {
    if (said) return said;
    if (role === "user") return state.userName || "You";
    if (role === "assistant") return persona;
    return "System";
  }

  // --- day selector ---------------------------------------------------------------------------

  function renderCalendar() {
    const box = $("calendar");
    box.replaceChildren();
    const [y, m] = state.month;
    const head = el("div", "cal-head");
    const prev = el("button", "cal-nav", "‹");
    prev.type = "button";
    prev.setAttribute("aria-label", "Previous month");
    prev.onclick = () => { state.month = m === 0 ? [y - 1, 11] : [y, m - 1]; renderCalendar(); };
    const next = el("button", "cal-nav", "›");
    next.type = "button";
    next.setAttribute("aria-label", "Next month");
    next.onclick = () => { state.month = m === 11 ? [y + 1, 0] : [y, m + 1]; renderCalendar(); };
    const title = new Date(Date.UTC(y, m, 1)).toLocaleDateString(undefined, { month: "long", year: "numeric", timeZone: "UTC" });
    head.append(prev, el("span", "cal-title", title), next);
    const grid = el("div", "cal-grid");
    for (const name of ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"]) grid.append(el("span", "cal-dow", name));
    const first = (new Date(Date.UTC(y, m, 1)).getUTCDay() + 6) % 7;
    for (let i = 0; i < first; i += 1) grid.append(el("span", "cal-pad"));
    const count = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
    for (let d = 1; d <= count; d += 1) {
      const label = y + "-" + String(m + 1).padStart(2, "0") + "-" + String(d).padStart(2, "0");
      const button = el("button", "cal-day", d);
      button.type = "button";
      button.dataset.day = label;
      const mark = state.days.get(label);
      if (mark) {
        button.classList.add("has");
        button.title = mark.messages + " messages" + (mark.summarised ? ", summarised" : "");
      }
      if (label === state.day) button.classList.add("selected");
      if (label === state.today) button.classList.add("today");
      button.onclick = () => { toggleCalendar(false); showDay(label); };
      grid.append(button);
    }
    box.append(head, grid);
  }

  function toggleCalendar(open) {
    $("calendar").hidden = !open;
    $("day-pick").setAttribute("aria-expanded", String(open));
    if (open) {
      const [y, m] = (state.day || state.today).split("-").map(Number);
      state.month = [y, m - 1];
      renderCalendar();
    }
  }

  // --- summary card ---------------------------------------------------------------------------

  function renderCard(data) {
    const card = $("card");
    card.replaceChildren();
    const head = el("div", "card-head");
    head.append(el("h2", "", "Day Summary (" + dayTitle(data.day) + ")"));
    const regen = el("button", "regen", "Regenerate summary");
    regen.type = "button";
    regen.id = "regenerate";
    regen.disabled = !data.card || data.card.message_count === 0 || data.card.regenerate_pending;
    regen.onclick = () => regenerate(data.day);
    head.append(regen);
    card.append(head);
    if (!data.card || !data.card.summary_markdown) {
      card.append(el("p", "muted", data.card ? "No summary yet for this day." : "No messages on this day."));
    } else {
      card.append(renderSections(data.card.sections));
      const when = data.card.updated_time ? "Updated at " + data.card.updated_time : "";
      card.append(el("p", "muted small", when + (data.card.status === "final" ? " · final" : "")));
    }
    if (data.card && data.card.regenerate_pending) {
      card.append(el("p", "pending", "A new summary is on its way; this page updates when it is ready."));
    }
  }

  function renderSections(sections) {
    const box = el("div", "sections");
    for (const section of sections) {
      box.append(el("h3", "", section.title));
      if (section.text) box.append(el("p", "", section.text));
      if (section.items.length) {
        const list = el("ul");
        for (const item of section.items) list.append(el("li", "", item));
        box.append(list);
      } else if (!section.text) {
        box.append(el("p", "muted", "none"));
      }
    }
    return box;
  }

  async function regenerate(day) {
    $("regenerate").disabled = true;
    try {
      const out = await api("/timeline/api/days/" + day + "/regenerate", { method: "POST" });
      status(out.status === "queued" ? "Queued: the summary will be rewritten in a minute or two." : "Already queued.");
      await showDay(day, { keepStatus: true });
      pollUntilRewritten(day, 0);
    } catch (error) {
      status(error.message);
      $("regenerate").disabled = false;
    }
  }

  function pollUntilRewritten(day, attempt) {
    if (attempt >= 10) return;
    window.setTimeout(async () => {
      if (state.day !== day) return;
      const data = await api("/timeline/api/days/" + day).catch(() => null);
      if (data && data.card && !data.card.regenerate_pending) {
        render(data);
        status("The summary was rewritten.");
      } else {
        pollUntilRewritten(day, attempt + 1);
      }
    }, 20000);
  }

  // --- timeline -------------------------------------------------------------------------------

  function renderEntry(entry, summary) {
    const row = el("div", "entry " + entry.type + " role-" + entry.role + " kind-" + entry.kind);
    row.id = (entry.type === "compaction" ? "c-" : "m-") + entry.id;
    row.append(el("span", "time", entry.time));
    if (entry.type === "message") {
      row.append(el("span", "who", speaker(entry.role, entry.speaker) + ":"), el("span", "text", entry.content));
      // A follow-up: the bot wrote first.
      if (entry.kind === "proactive") row.append(el("span", "tag", "follow-up (wrote first)"));
      if (entry.kind === "reminder") row.append(el("span", "tag", "reminder you asked for"));
      // An answer the person stopped while it was being written.
      if (entry.kind === "stopped") row.append(el("span", "tag", "stopped"));
      // A line of a chat the person had with another assistant and imported: never the bot's.
      if (entry.kind === "imported") row.append(el("span", "tag", "imported"));
      // What the person put on this answer.
      if (entry.reactions && entry.reactions.length) {
        row.append(el("span", "tag reactions", entry.reactions.join(" ")));
      }
      return row;
    }
    const label = entry.type === "note" ? capitalise(entry.content) : "Conversation compacted for the model";
    row.append(el("span", "who", "System:"), el("span", "text", label));
    const more = el("button", "expand", "expand ▸");
    more.type = "button";
    const body = el("div", "expanded");
    body.hidden = true;
    if (entry.type === "note") {
      body.append(summary ? renderSections(summary) : el("p", "muted", "No summary text."));
    } else {
      body.append(el("p", "", entry.content));
    }
    more.onclick = () => { body.hidden = !body.hidden; more.textContent = body.hidden ? "expand ▸" : "collapse ▾"; };
    row.append(more, body);
    return row;
  }

  function capitalise(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function renderTimeline(data) {
    const box = $("timeline");
    box.replaceChildren(el("h2", "", "Timeline (" + dayTitle(data.day) + ")"));
    const summary = data.card ? data.card.sections : null;
    if (!data.blocks.length) box.append(el("p", "muted", "Nothing was said on this day."));
    for (const block of data.blocks) {
      if (block.type === "entry") {
        box.append(renderEntry(block.entries[0], summary));
        continue;
      }
      const fold = el("div", "fold");
      const toggle = el("button", "fold-toggle");
      toggle.type = "button";
      const inner = el("div", "fold-body");
      inner.hidden = true;
      for (const entry of block.entries) inner.append(renderEntry(entry, summary));
      const label = (open) => (open ? "▾ " : "▸ ") + block.entries.length + " older messages folded (covered by the summary)";
      toggle.textContent = label(false);
      toggle.onclick = () => { inner.hidden = !inner.hidden; toggle.textContent = label(!inner.hidden); };
      fold.append(toggle, inner);
      box.append(fold);
    }
    if (data.truncated) box.append(el("p", "muted", "This day is long: only its first messages are shown."));
  }

  function render(data) {
    renderCard(data);
    renderTimeline(data);
  }

  async function showDay(day, options) {
    state.day = day;
    $("day-current").textContent = dayTitle(day) === day ? day : dayTitle(day) + " · " + day;
    for (const [id, target] of [["day-today", state.today], ["day-yesterday", state.yesterday]]) {
      $(id).classList.toggle("active", day === target);
    }
    if (!(options && options.keepStatus)) status("Loading…");
    const data = await api("/timeline/api/days/" + day);
    render(data);
    if (!(options && options.keepStatus)) status("");
    return data;
  }

  function reveal(messageId) {
    const row = document.getElementById("m-" + messageId);
    if (!row) return;
    const fold = row.closest(".fold-body");
    if (fold && fold.hidden) fold.previousElementSibling.click();
    row.classList.add("highlight");
    row.scrollIntoView({ block: "center" });
  }

  // --- search and open ------------------------------------------------------------------------

  async function search(event) {
    event.preventDefault();
    const q = $("search-q").value.trim();
    if (!q) return;
    const scope = $("search-scope").value;
    const params = new URLSearchParams({ q: q, scope: scope });
    if (scope === "day") params.set("day", state.day);
    status("Searching…");
    try {
      renderResults(await api("/timeline/api/search?" + params.toString()));
      status("");
    } catch (error) {
      status(error.message);
    }
  }

  function renderResults(data) {
    const box = $("results");
    box.hidden = false;
    box.dataset.query = data.query;
    box.replaceChildren(el("h2", "", "Results"));
    if (!data.results.length) box.append(el("p", "muted", "Nothing found. Try other words, or Scope: All."));
    const list = el("ol", "result-list");
    data.results.forEach((hit) => {
      const item = el("li", "result kind-" + hit.kind);
      const facts = ["kind: " + hit.kind, "day: " + hit.day_label, "score: " + hit.score.toFixed(2)];
      if (hit.kind === "message") facts.push("covered_by_summary: " + (hit.covered_by_summary ? "yes" : "no"));
      item.append(el("div", "facts", facts.join("   ")));
      item.append(el("div", "snippet", "“" + (hit.kind === "summary" ? hit.summary_snippet : hit.snippet) + "”"));
      const open = el("button", "open", "Open");
      open.type = "button";
      open.onclick = () => openResult(hit);
      item.append(open);
      list.append(item);
    });
    box.append(list);
  }

  async function openResult(hit) {
    const box = $("opened");
    try {
      const data = hit.kind === "message"
        ? await api("/timeline/api/messages/" + hit.message_id)
        : await api("/timeline/api/summaries/" + hit.day_segment_id);
      box.hidden = false;
      box.replaceChildren(el("h2", "", hit.kind === "message" ? "Message" : "Day summary (" + hit.day_label + ")"));
      if (hit.kind === "message") {
        for (const message of data.messages) {
          const row = el("div", "entry message role-" + message.role);
          row.append(el("span", "time", message.created_at.replace("T", " ").slice(0, 16)));
          row.append(el("span", "who", speaker(message.role, message.speaker) + ":"), el("span", "text", message.content));
          box.append(row);
        }
      } else {
        box.append(renderSections(data.sections));
      }
      const go = el("button", "show-day", "Show in the day");
      go.type = "button";
      go.onclick = async () => {
        await showDay(hit.day_label);
        if (hit.kind === "message") reveal(hit.message_id);
      };
      const close = el("button", "close", "Close");
      close.type = "button";
      close.onclick = () => { box.hidden = true; };
      box.append(go, close);
      box.scrollIntoView({ block: "start" });
    } catch (error) {
      status(error.message);
    }
  }

  // --- start ----------------------------------------------------------------------------------

  async function start() {
    status("Loading…");
    try {
      const data = await api("/timeline/api/days");
      state.today = data.today;
      state.yesterday = data.yesterday;
      state.userName = data.user && data.user.name ? data.user.name : "";
      state.days = new Map(data.days.map((d) => [d.day, d]));
      await showDay(state.today);
      if (!data.user) status("Nothing here yet: write to " + persona + " in the chat first.");
    } catch (error) {
      status(error.message);
    }
  }

  function main() {
    $("day-today").onclick = () => showDay(state.today).catch((e) => status(e.message));
    $("day-yesterday").onclick = () => showDay(state.yesterday).catch((e) => status(e.message));
    $("day-pick").onclick = () => toggleCalendar($("calendar").hidden);
    $("search").addEventListener("submit", search);
    state.initData = launch.get("tgWebAppData") || "";
    if (insideTelegram) loadTelegramScript();
    if (state.initData) {
      start();
    } else if (!insideTelegram) {
      status("Open the timeline from the chat with " + persona + " in Telegram (send /timeline).");
    }
  }

  // memory.js ("What I remember") works with the same sign-in, page and day view.
  window.timeline = {
    $: $, api: api, el: el, status: status, dayTitle: dayTitle, showDay: showDay,
    initData: () => state.initData, launch: launch,
  };
  main();
})();
