// "Bring your history": a ChatGPT or Claude export uploaded as the request's body (never read into
// the page), its preview, the Import and Cancel buttons, and the run's progress until it is stored.
// Uses timeline.js's sign-in and helpers; all text is inserted with textContent.
"use strict";

(function () {
  const t = window.timeline;
  const { $, status } = t;
  const box = $("import");
  let current = null;

  function show(id, visible) {
    $(id).hidden = !visible;
  }

  async function upload() {
    const file = $("import-file").files[0];
    if (!file) {
      $("import-found").textContent = "Choose the export's file first.";
      return;
    }
    $("import-upload").disabled = true;
    $("import-found").textContent = "Reading " + file.name + "…";
    try {
      const response = await fetch("/timeline/api/imports", {
        method: "POST",
        headers: {
          Authorization: "tma " + t.initData(),
          "Content-Type": "application/octet-stream",
          "X-File-Name": encodeURIComponent(file.name),
        },
        body: file,
        cache: "no-store",
      });
      const body = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(body.error || "The upload failed (" + response.status + ").");
      current = body.import_id;
      $("import-found").textContent = body.text;
      show("import-go", true);
      show("import-cancel", true);
    } catch (error) {
      $("import-found").textContent = error.message;
    } finally {
      $("import-upload").disabled = false;
    }
  }

  function progressLine(run) {
    if (run.status === "stored") {
      return "Done: " + run.conversations_stored + " conversations and " + run.messages_stored +
        " messages stored. I'll learn from them in the background.";
    }
    if (run.status === "failed") return "The import stopped: " + (run.error || "something went wrong") + ".";
    return "Importing… " + run.conversations_stored + " of " + run.conversations_total + " conversations, " +
      run.messages_stored + " of " + run.messages_total + " messages stored.";
  }

  async function follow(importId) {
    try {
      const run = await t.api("/timeline/api/imports/" + importId);
      $("import-progress").textContent = progressLine(run);
      if (run.status === "running" || run.status === "previewed") {
        window.setTimeout(() => follow(importId), 1000);
      }
    } catch (error) {
      $("import-progress").textContent = error.message;
    }
  }

  async function begin() {
    show("import-go", false);
    show("import-cancel", false);
    try {
      const run = await t.api("/timeline/api/imports/" + current + "/start", { method: "POST" });
      $("import-progress").textContent = progressLine(run);
      follow(current);
    } catch (error) {
      $("import-progress").textContent = error.message;
    }
  }

  async function cancel() {
    show("import-go", false);
    show("import-cancel", false);
    try {
      await t.api("/timeline/api/imports/" + current + "/cancel", { method: "POST" });
      $("import-found").textContent = "Cancelled: nothing from that file was stored.";
    } catch (error) {
      $("import-found").textContent = error.message;
    }
  }

  function open() {
    box.hidden = false;
    box.scrollIntoView({ block: "start" });
    status("");
  }

  $("import-open").onclick = open;
  $("import-upload").onclick = upload;
  $("import-go").onclick = begin;
  $("import-cancel").onclick = cancel;
  // The chat's button to this page (a file over Telegram's download limit) opens it here.
  if (new URLSearchParams(window.location.search).has("import")) open();
})();
