"""The timeline's page: its scripts and stylesheet in the Mini Apps' shell (bot/web/miniapp.py).

No data is in the HTML: Telegram gives the signed initData to the page in the URL fragment, which
never reaches the server, so the script fetches the API with it. Nothing comes from a CDN; the
script loads telegram.org's telegram-web-app.js only when Telegram opened the page (theme, ready).
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from bot.web.miniapp import render_shell

STATIC_DIR = Path(__file__).parent / "static"
# The page may load our own files and telegram.org's script (inside Telegram), and talk to us only.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' https://telegram.org; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'"
)


def render_page(*, persona_name: str, version: str) -> str:
    """The HTML shell of the timeline."""
    name = escape(persona_name)
    body = f"""<header class="top">
  <h1>{name}</h1>
  <span class="mode">Continuous</span>
  <button type="button" id="memory-open" class="chip">What I remember</button>
  <button type="button" id="import-open" class="chip">Bring your history</button>
</header>
<nav class="days" aria-label="Day selector">
  <button type="button" id="day-today" class="chip">Today</button>
  <button type="button" id="day-yesterday" class="chip">Yesterday</button>
  <button type="button" id="day-pick" class="chip" aria-expanded="false">Pick date ▾</button>
  <span id="day-current" class="current"></span>
</nav>
<div id="calendar" class="calendar" hidden></div>
<form id="search" class="search" role="search">
  <input id="search-q" type="search" placeholder="Search our conversations" autocomplete="off"
    aria-label="Search">
  <select id="search-scope" aria-label="Scope">
    <option value="day">Scope: Day</option>
    <option value="all" selected>Scope: All</option>
  </select>
  <button type="submit" id="search-go">Go</button>
</form>
<section id="memory" class="memory" hidden aria-label="What I remember"></section>
<section id="import" class="import" hidden aria-label="Bring your history">
  <h2>Bring your history</h2>
  <p>Your ChatGPT or Claude export (the .zip they send you, or its conversations.json): I read it
    first and tell you what it holds; nothing is stored until you press Import.</p>
  <input id="import-file" type="file" accept=".zip,.json,application/zip,application/json"
    aria-label="Export file">
  <button type="button" id="import-upload">Upload</button>
  <p id="import-found" class="found"></p>
  <button type="button" id="import-go" hidden>Import</button>
  <button type="button" id="import-cancel" hidden>Cancel</button>
  <p id="import-progress" class="progress" role="status"></p>
</section>
<section id="results" class="results" hidden aria-label="Search results"></section>
<section id="opened" class="opened" hidden aria-label="Opened result"></section>
<section id="card" class="card" aria-label="Day summary"></section>
<section id="timeline" class="timeline" aria-label="Timeline"></section>
<p id="status" class="status" role="status"></p>
<noscript>The timeline needs JavaScript.</noscript>"""
    return render_shell(
        path="/timeline",
        title=f"{persona_name} · Timeline",
        persona_name=persona_name,
        files=("timeline.css", "timeline.js", "memory.js", "imports.js"),
        version=version,
        body=body,
    )
