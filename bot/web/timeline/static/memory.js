// "What I remember": the profile as the bot reads it, then the rest (recalled when relevant, not
// brought up, past plans); each fact with where it comes from (their own words, quoted and dated,
// "you asked me to remember this", or that no source is left), the day it comes from and buttons to
// pin or unpin, hide ("don't bring this up") or bring it up again, reword (an edit in place) and
// delete. Their lines in groups, if any, with a button that deletes them. Uses timeline.js's sign-in
// and helpers; all text is inserted with textContent.
"use strict";

(function () {
  const t = window.timeline;
  const { $, el, status } = t;
  const TAGS = {
    recalled: "recalled when relevant",
    hidden: "not brought up unless you ask",
    past: "a plan whose date has passed",
  };

  const ORIGINS = {
    asked: "You asked me to remember this",
    call: "Said in a call",
    none: "No source left: the messages it came from are gone.",
  };

  // Where a fact comes from: how it came, then the lines it stands on, each quoted with its day.
  function renderSources(sources) {
    const box = el("div", "fact-source");
    const learned = t.dayTitle(sources.learned.slice(0, 10));
    if (sources.origin === "none") box.append(el("p", "source-origin", ORIGINS.none));
    else if (ORIGINS[sources.origin] && !(sources.origin === "call" && sources.lines.length)) {
      box.append(el("p", "source-origin", ORIGINS[sources.origin] + " (" + learned + ")."));
    }
    for (const line of sources.lines) {
      const said = el("p", "source-line");
      said.append(el("span", "source-when", (line.in_call ? "You said in a call, " : "You said, ") + t.dayTitle(line.day) + ": "));
      said.append(el("q", "source-quote", line.text));
      box.append(said);
    }
    if (sources.more) box.append(el("p", "source-more", "…and " + sources.more + " more time" + (sources.more > 1 ? "s" : "") + "."));
    return box;
  }

  function button(className, text, onclick) {
    const node = el("button", className, text);
    node.type = "button";
    node.onclick = onclick;
    return node;
  }

  function renderFact(fact, data, box) {
    const item = el("li", "fact standing-" + fact.standing + (fact.pinned ? " pinned" : ""));
    item.id = "f-" + fact.id;
    item.dataset.standing = fact.standing;
    const body = el("div", "fact-body");
    const text = el("span", "text", fact.content);
    body.append(text);
    if (fact.pinned) body.append(el("span", "tag pin-tag", "pinned"));
    if (TAGS[fact.standing]) body.append(el("span", "tag standing-tag", TAGS[fact.standing]));
    const day = button("fact-day", t.dayTitle(fact.day), () => {
      box.hidden = true;
      t.showDay(fact.day).catch((e) => status(e.message));
    });
    day.dataset.day = fact.day;
    day.title = "Show " + fact.day + " in the timeline · " + fact.source;
    body.append(day);
    const actions = el("div", "fact-actions");
    actions.append(
      button("pin", fact.pinned ? "Unpin" : "Pin", () =>
        change(fact, fact.pinned ? "unpin" : "pin", fact.pinned ? "Unpinned: " : "Pinned: ")),
      button("hide", fact.hidden ? "Bring up again" : "Don't bring up", () =>
        change(fact, fact.hidden ? "show" : "hide", fact.hidden ? "I'll bring it up again: " : "I won't bring it up: ")),
      button("reword", "Reword", () => startReword(fact, item, data.max_chars)),
      button("forget", "Delete", () => change(fact, "forget", "Forgotten: ")),
    );
    item.append(body, renderSources(fact.sources), actions);
    return item;
  }

  function renderList(box, data) {
    const part = el("div", "memory-facts");
    part.id = "memory-facts";
    if (!data.profile.length && !data.rest.length) {
      part.append(el("p", "muted", "Nothing saved about you yet."));
      return part;
    }
    part.append(el("p", "muted small", "Your profile is what I read every time we talk; the rest I recall when it's relevant."));
    const sections = [["In your profile", "profile-facts", data.profile], ["Also remembered", "rest-facts", data.rest]];
    for (const [title, id, facts] of sections) {
      if (!facts.length) continue;
      part.append(el("h3", "", title));
      const list = el("ul", "fact-list");
      list.id = id;
      for (const fact of facts) list.append(renderFact(fact, data, box));
      part.append(list);
    }
    if (data.more) part.append(el("p", "muted", "…and " + data.more + " more, not listed here."));
    return part;
  }

  function showFacts(data) {
    const box = $("memory");
    const old = $("memory-facts");
    const fresh = renderList(box, data);
    if (old) old.replaceWith(fresh); else box.insertBefore(fresh, box.children[1] || null);
  }

  async function change(fact, action, said) {
    try {
      const data = await t.api("/timeline/api/facts/" + fact.id + "/" + action, { method: "POST" });
      showFacts(data);
      status(said + fact.content);
    } catch (error) {
      status(error.message);
    }
  }

  // An edit in place: the fact's words in a field, saved with Enter or Save, left with Escape or Cancel.
  function startReword(fact, item, maxChars) {
    if (item.querySelector(".reword-form")) return;
    const form = el("form", "reword-form");
    const input = el("input", "reword-input");
    input.type = "text";
    input.value = fact.content;
    input.maxLength = maxChars;
    input.setAttribute("aria-label", "New wording");
    const save = el("button", "reword-save", "Save");
    save.type = "submit";
    const cancel = button("reword-cancel", "Cancel", () => form.remove());
    form.append(input, save, cancel);
    input.addEventListener("keydown", (event) => { if (event.key === "Escape") form.remove(); });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      save.disabled = true;
      try {
        const data = await t.api("/timeline/api/facts/" + fact.id + "/reword", {
          method: "POST", json: { content: input.value },
        });
        showFacts(data);
        status("Reworded: " + input.value.trim().replace(/\s+/g, " "));
      } catch (error) {
        status(error.message);
        save.disabled = false;
      }
    });
    item.append(form);
    input.focus();
  }

  async function showMemory() {
    const box = $("memory");
    status("Loading…");
    try {
      const [data, inGroups] = await Promise.all([t.api("/timeline/api/facts"), t.api("/timeline/api/group-lines")]);
      box.hidden = false;
      box.replaceChildren(el("h2", "", "What I remember"), renderList(box, data));
      if (inGroups.lines > 0) box.append(groupLines(inGroups.lines));
      box.append(button("close", "Close", () => { box.hidden = true; }));
      box.scrollIntoView({ block: "start" });
      status("");
    } catch (error) {
      status(error.message);
    }
  }

  // What they said in groups is each group's memory, not theirs: shown only when there is some, it
  // can be deleted (the text blanked in every group), after a second press that says what goes.
  function groupLines(count) {
    const part = el("div", "group-lines");
    part.id = "group-lines";
    part.append(el("h3", "", "In groups"));
    const said = count === 1 ? "1 message" : count + " messages";
    part.append(el("p", "", "You said " + said + " in groups I'm in. They stay in those groups' memory until you delete them."));
    const ask = button("forget", "Delete my messages in groups", () => {
      ask.hidden = true;
      const sure = el("p", "pending", "This deletes the text of all " + said + " in every group, for good. What a group's summaries say stays the group's. Your private chat with me is not touched.");
      const yes = button("forget", "Yes, delete them", () => forgetGroupLines(part, yes));
      yes.id = "group-lines-confirm";
      const no = button("", "Cancel", () => { sure.remove(); yes.remove(); no.remove(); ask.hidden = false; });
      part.append(sure, yes, no);
    });
    ask.id = "group-lines-delete";
    part.append(ask);
    return part;
  }

  async function forgetGroupLines(part, yes) {
    yes.disabled = true;
    try {
      await t.api("/timeline/api/group-lines/forget", { method: "POST" });
      part.remove();
      status("Deleted: your messages in groups.");
    } catch (error) {
      status(error.message);
      yes.disabled = false;
    }
  }

  $("memory-open").onclick = showMemory;
})();
