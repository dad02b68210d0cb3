"""The dashboard in a real browser: Debian's headless Chromium, driven by Selenium, against the pages
app served by uvicorn on seeded rows, signed in with initData as Telegram signs it.

Every chart is drawn as inline SVG with a point per day; the period can change; a person who is
not an admin sees only why. With DASHBOARD_SCREENSHOT=<path> the page is saved there (that is how
docs/dashboard.png was made). Skipped, saying why, only when Chromium is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from agent.core.settings import Settings
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from tests.bot.conftest import ADMIN, TOKEN
from tests.bot.dashboard.seed import DAY1, DAY2, NOW, seed_dashboard
from tests.bot.timeline.test_browser import _wait, chromium, pytestmark, serve_seeded

CHARTS = ("active", "turns", "cost", "cache", "latency", "refusals", "lag")
__all__ = ["pytestmark"]


def _signed(telegram_id: int) -> str:
    user = {"id": telegram_id, "first_name": "Ada", "language_code": "en"}
    return launch_fragment(sign_init_data(TOKEN, user=user, auth_date=int(NOW.timestamp())))


def _titles(driver: Any, chart: str) -> list[str]:
    """Each point's title, read at once (a redraw replaces the elements)."""
    script = "return [...document.querySelectorAll(arguments[0])].map((t) => t.textContent);"
    return [str(t) for t in driver.execute_script(script, f"#chart-{chart} svg circle.point title")]


def test_an_admin_sees_every_chart_drawn_and_others_see_why_not(
    settings_factory: Callable[..., Settings], engine: Any, tmp_path: Path
) -> None:
    settings = settings_factory(model="anthropic:claude-haiku-4-5", embedder="none")
    with serve_seeded(settings, then=seed_dashboard) as base, chromium() as driver:
        driver.get(f"{base}/dashboard#{_signed(ADMIN)}")
        _wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"), "charts")
        for chart in CHARTS:
            assert driver.find_elements(By.CSS_SELECTOR, f"#chart-{chart} svg path.line"), chart
        turns = _titles(driver, "turns")
        assert len(turns) == 30 and turns[-2:] == [f"{DAY1} · turns: 20", f"{DAY2} · turns: 2"]
        assert _titles(driver, "latency") == [f"{DAY1} · p95: 1.9 s", f"{DAY2} · p95: 700 ms"]
        assert driver.find_element(By.ID, "latest-latency").text == "today: 700 ms"
        assert f"{DAY1} · read from cache: 80%" in _titles(driver, "cache")
        legend = driver.find_element(By.CSS_SELECTOR, "#chart-cost .legend").text
        assert "billed" in legend and "uncached" in legend
        refusals = driver.find_element(By.CSS_SELECTOR, "#chart-refusals .legend").text
        assert "USER_DAILY_TOKENS" in refusals and "strangers" in refusals and "not allowed" in refusals
        # Refusals by limit over days: each rate limit that refused is a line of its own, a point a day.
        assert "rate limit: message per minute" in refusals and "rate limit: export per day" in refusals
        lines = driver.find_elements(By.CSS_SELECTOR, "#chart-refusals svg path.line")
        assert len(lines) == 5  # USER_DAILY_TOKENS, not allowed, strangers and the two rate limits
        drawn = _titles(driver, "refusals")
        assert f"{DAY1} · rate limit: message per minute: 4" in drawn
        assert f"{DAY2} · rate limit: export per day: 5" in drawn
        tiles = driver.find_element(By.ID, "now").text
        assert "1\nupdates waiting" in tiles and "1.0 min\noldest waiting" in tiles
        shot = Path(os.environ.get("DASHBOARD_SCREENSHOT") or tmp_path / "dashboard.png")
        assert driver.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        Select(driver.find_element(By.ID, "period")).select_by_value("7")
        _wait(driver, lambda d: len(_titles(d, "turns")) == 7, "a week")
        # Drawn with the page's own script only: the browser refused nothing (no CSP violation).
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []

        driver.get("about:blank")  # a new launch: the fragment of someone who is not an admin
        driver.get(f"{base}/dashboard#{_signed(501)}")
        _wait(driver, lambda d: "admins" in d.find_element(By.ID, "status").text, "the refusal")
        assert driver.find_elements(By.CSS_SELECTOR, "svg") == []
