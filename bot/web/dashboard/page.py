"""The dashboard's page: server-rendered HTML that loads one script and one stylesheet of our own.

No data is in the HTML: Telegram gives the signed initData in the URL fragment, which never reaches
the server, and the script fetches the data with it. The charts are inline SVG drawn by that script;
nothing is loaded from anywhere else (not even Telegram's script: the fragment is enough).
"""

from __future__ import annotations

import hashlib
from html import escape
from pathlib import Path

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


def asset_version() -> str:
    """A digest of the static files, so a deployment's new script is never served from a stale cache."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.iterdir()):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def render_page(*, persona_name: str, version: str) -> str:
    """The HTML shell of the dashboard."""
    name = escape(persona_name)
    charts = "\n".join(
        f'<section class="chart" id="chart-{key}" aria-label="{escape(title)}">'
        f'<h2>{escape(title)} <span class="latest" id="latest-{key}"></span></h2>'
        f'<p class="about">{escape(about)}</p><div class="plot"></div><p class="legend"></p></section>'
        for key, title, about in CHARTS
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<meta name="referrer" content="no-referrer">
<title>{name} · Dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/static/dashboard.css?v={version}">
<script src="/dashboard/static/dashboard.js?v={version}" defer></script>
</head>
<body data-persona="{name}">
<header class="top">
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
<noscript>The dashboard needs JavaScript.</noscript>
</body>
</html>
"""
