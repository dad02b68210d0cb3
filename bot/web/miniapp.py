"""What the Mini Apps (the timeline and the dashboard) share: the page shell, its routes and
versioned files (their sign-in is bot/web/auth.py).

A Mini App's page holds no data: Telegram gives the signed initData in the URL fragment, which never
reaches the server, and the page's scripts send it back on every call (`static/miniapp.js` reads it
and signs the calls). Each Mini App serves its own files and these shared ones under its own path.
"""

from __future__ import annotations

import hashlib
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
# Loaded before a Mini App's own files: the theme and base styles, the launch parameters and sign-in.
SHARED_FILES = ("miniapp.css", "miniapp.js")


def asset_version(static_dir: Path) -> str:
    """A digest of a Mini App's files and the shared ones, so a new script is never served stale."""
    digest = hashlib.sha256()
    for path in [*sorted(STATIC_DIR.iterdir()), *sorted(static_dir.iterdir())]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def render_shell(
    *, path: str, title: str, persona_name: str, files: tuple[str, ...], version: str, body: str
) -> str:
    """The HTML of a Mini App's page: the shared files, then `files` (its own, from its static path)."""
    links = []
    for name in (*SHARED_FILES, *files):
        url = f"{path}/static/{name}?v={version}"
        links.append(
            f'<link rel="stylesheet" href="{url}">'
            if name.endswith(".css")
            else f'<script src="{url}" defer></script>'
        )
    head = "\n".join(links)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, viewport-fit=cover">
<meta name="referrer" content="no-referrer">
<title>{escape(title)}</title>
<link rel="icon" href="data:,">
{head}
</head>
<body data-persona="{escape(persona_name)}">
{body}
</body>
</html>
"""


def page_routes(path: str, *, html: str, policy: str, static_dir: Path) -> list[BaseRoute]:
    """The page at `path` (never cached, under `policy`); its and the shared files under `path`/static."""
    headers = {"Content-Security-Policy": policy, "Cache-Control": "no-cache"}

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(html, headers=headers)

    files = StaticFiles(directory=static_dir, packages=[("bot.web", "static")])
    return [Route(path, page, methods=["GET"]), Mount(f"{path}/static", app=files)]
