"""The dashboard's page: its script and stylesheet in the Mini Apps' shell (bot/web/miniapp.py).

No data is in the HTML: Telegram gives the signed initData in the URL fragment, which never reaches
the server, and the script fetches the data with it. The charts are inline SVG drawn by that script;
nothing is loaded from anywhere else (not even Telegram's script: the fragment is enough).
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from bot.web.miniapp import render_shell

STATIC_DIR = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
# (id, title, what it shows) of each chart, in the page's order.
CHARTS = (
    ("active", "Active", "people and groups who wrote"),
    ("turns", "Turns", "messages the model answered"),
    ("cost", "Cost", "estimated US dollars, as billed and had nothing been cached"),
    ("cache", "Cache read share", "input tokens read from the prompt cache"),
    ("latency", "p95 time to answer", "from a turn's start to its answer, 95th percentile"),
    ("refusals", "Refusals", "messages refused by a limit or by access"),
    ("lag", "Job lag, p95", "how long after it was due the work was done"),
)


def render_page(*, persona_name: str, version: str) -> str:
    """The HTML shell of the dashboard."""
    name = escape(persona_name)
    charts = "\n".join(
        f'<section class="chart" id="chart-{key}" aria-label="{escape(title)}">'
        f'<h2>{escape(title)} <span class="latest" id="latest-{key}"></span></h2>'
        f'<p class="about">{escape(about)}</p><div class="plot"></div><p class="legend"></p></section>'
        for key, title, about in CHARTS
    )
    body = f"""<header class="top">
  <h1>{name} · Dashboard</h1>
  <select id="period" aria-label="Period">
    <option value="7">7 days</option>
    <option value="30" selected>30 days</option>
    <option value="90">90 days</option>
  </select>
</header>
<section id="now" class="now" aria-label="Right now"></section>
{charts}
<p id="status" class="status" role="status"></p>
<noscript>The dashboard needs JavaScript.</noscript>"""
    return render_shell(
        path="/dashboard",
        title=f"{persona_name} · Dashboard",
        persona_name=persona_name,
        files=("dashboard.css", "dashboard.js"),
        version=version,
        body=body,
    )
