"""uvicorn's settings for our web apps: the bot's logging, and no access lines.

uvicorn would log every request at INFO with the client's address and the full path, query string
included: a Mini App search (`/timeline/api/search?q=...`) would put the person's words and IP in
the logs. Our handlers log what a request did, without either; uvicorn's own access log stays off
(and `uvicorn.access` is held at WARNING by bot/logs.py, should anything turn it on).
"""

from __future__ import annotations

from typing import Any

import uvicorn
from starlette.types import ASGIApp


def server_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """A uvicorn config for `app` that logs through the root logger and writes no access lines."""
    return uvicorn.Config(app, log_config=None, access_log=False, **options)
