"""The timeline in a real browser: Debian's headless Chromium, driven by Selenium, against the real
app served by uvicorn over HTTP, on seeded data, signed in with initData as Telegram signs it.

Pick a day, unfold, search, open a result. With TIMELINE_SCREENSHOT=<path> the main screen is
saved there (that is how docs/timeline.png was made); otherwise into the test's tmp folder.
Skipped, saying why, only when Chromium and its driver are not installed (`.ci/run` installs them).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from pydantic_ai.models.test import TestModel
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from bot.runtime import build_runtime
from bot.web.serve import build_pages_app
from tests.bot.conftest import TOKEN
from tests.bot.timeline.seed import ANA, FOLLOW_UP, NOW, seed_timeline
from tests.conftest import IN_CI

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=480,960",
    "--lang=en-US",
)

NO_CHROMIUM = "Chromium is not installed here (apt-get install -y chromium chromium-driver; .ci/run does it)"


def browser_missing() -> bool:
    """Chromium or its driver is not installed."""
    return not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists())


# Outside CI a missing browser skips, saying so; in CI the test runs and fails (`chromium`), as an
# unreachable PostgreSQL does.
pytestmark = [pytest.mark.skipif(browser_missing() and not IN_CI, reason=NO_CHROMIUM), pytest.mark.process]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_seeded(
    settings: Settings, *, then: Callable[[async_sessionmaker[AsyncSession]], Awaitable[Any]] | None = None
) -> Iterator[str]:
    """The pages app on a seeded database (and `then`'s rows), served by uvicorn in its own thread
    and event loop."""
    port = _free_port()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        runtime = await build_runtime(
            settings,
            clock=FrozenClock(current=NOW),
            model=TestModel(),
            summary_model=TestModel(),
            migrate=False,
        )
        try:
            await seed_timeline(runtime.sessions)
            if then is not None:
                await then(runtime.sessions)
            config = uvicorn.Config(build_pages_app(runtime), host="127.0.0.1", port=port, log_config=None)
            server = holder["server"] = uvicorn.Server(config)
            server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
            ready.set()
            await server.serve()
        finally:
            ready.set()
            await runtime.close()

    thread = threading.Thread(target=lambda: asyncio.run(main()), name="timeline-server", daemon=True)
    thread.start()
    assert ready.wait(120), "the timeline server did not start"
    deadline = time.monotonic() + 30
    while "server" in holder and not holder["server"].started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "server" in holder and holder["server"].started, "the timeline server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if "server" in holder:
            holder["server"].should_exit = True
        thread.join(30)


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """Headless Debian Chromium with a fresh profile; never downloads a browser or a driver."""
    if browser_missing():
        pytest.fail(f"{NO_CHROMIUM}: in CI the browser tests must run")
    profile = tempfile.mkdtemp(prefix="timeline-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver: webdriver.Chrome, check: Callable[[webdriver.Chrome], Any], what: str) -> Any:
    try:
        return WebDriverWait(driver, 20, poll_frequency=0.1).until(check)
    except TimeoutException as exc:
        raise AssertionError(
            f"waited for {what}; page says: {driver.find_element(By.ID, 'status').text!r}"
        ) from exc


def _text(driver: webdriver.Chrome, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def _visible_texts(driver: webdriver.Chrome) -> list[str]:
    rows: list[WebElement] = driver.find_elements(By.CSS_SELECTOR, "#timeline .entry .text")
    return [row.text for row in rows if row.is_displayed()]


def test_pick_a_day_unfold_search_and_open_a_result(
    settings_factory: Callable[..., Settings], engine: Any, tmp_path: Path
) -> None:
    settings = settings_factory(embedder="minilm")
    init_data = sign_init_data(
        TOKEN, user={"id": ANA, "first_name": "Ana", "language_code": "en"}, auth_date=int(NOW.timestamp())
    )
    with serve_seeded(settings) as base, chromium() as driver:
        driver.get(f"{base}/timeline#{launch_fragment(init_data)}")

        # Today first, as the main screen.
        _wait(driver, lambda d: "Day Summary (Today)" in _text(d, "card"), "today's card")
        _wait(driver, lambda d: "Good morning! The concert is on Friday." in _visible_texts(d), "today")
        assert "No summary yet" in _text(driver, "card")
        # A message the bot wrote first is marked as a follow-up.
        follow_up = driver.find_element(By.CSS_SELECTOR, "#timeline .entry.kind-proactive")
        assert FOLLOW_UP in follow_up.text and "follow-up (wrote first)" in follow_up.text

        # Pick a day: the calendar marks the days with messages.
        driver.find_element(By.ID, "day-pick").click()
        marked = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#calendar .cal-day.has")]
        assert marked == ["1", "2", "3"]
        driver.find_element(By.CSS_SELECTOR, '#calendar .cal-day[data-day="2026-03-02"]').click()
        _wait(driver, lambda d: "Day Summary (Yesterday)" in _text(d, "card"), "yesterday's card")
        card = _text(driver, "card")
        assert "Ana talked about her cello rehearsal" in card and "play the Elgar concerto well" in card
        # Folded: what the summary covers is hidden behind one toggle, the rest is shown.
        fold = driver.find_element(By.CSS_SELECTOR, "#timeline .fold-toggle")
        assert fold.text == "▸ 4 older messages folded (covered by the summary)"
        assert _visible_texts(driver) == [
            "Day summary updated",
            "Conversation compacted for the model",
            "Do you think Marta would turn pages for me?",
            "Ask her, she offered last time.",
        ]
        shot = Path(os.environ.get("TIMELINE_SCREENSHOT") or tmp_path / "timeline.png")
        assert driver.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        # Unfold.
        fold.click()
        assert _visible_texts(driver)[0] == "Rehearsal went long today, the Elgar is hard."
        note = driver.find_element(By.CSS_SELECTOR, "#timeline .entry.note")
        note.find_element(By.CSS_SELECTOR, ".expand").click()
        assert "whether to ask Marta to turn pages" in note.text

        # Search everything, then open a result.
        driver.find_element(By.ID, "search-q").send_keys("night train to Porto")
        Select(driver.find_element(By.ID, "search-scope")).select_by_value("all")
        driver.find_element(By.ID, "search-go").click()
        results = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .result"), "results")
        facts = [r.find_element(By.CSS_SELECTOR, ".facts").text for r in results]
        assert facts[0].startswith("kind: summary") and "day: 2026-03-01" in facts[0]
        message = next(r for r, f in zip(results, facts, strict=True) if "kind: message" in f)
        assert "covered_by_summary: yes" in message.text and "score: " in message.text
        assert "I booked the night train to Porto!" in message.text
        message.find_element(By.CSS_SELECTOR, ".open").click()
        _wait(
            driver, lambda d: "I booked the night train to Porto!" in _text(d, "opened"), "the opened message"
        )

        # From the result to its place in the day: unfolded and highlighted.
        driver.find_element(By.CSS_SELECTOR, "#opened .show-day").click()
        _wait(driver, lambda d: "Day Summary (Sun, Mar 1, 2026)" in _text(d, "card"), "Sunday")
        highlighted = _wait(
            driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline .entry.highlight"), "the highlight"
        )
        assert highlighted[0].is_displayed() and "night train to Porto" in highlighted[0].text

        # Scope: this day only.
        driver.find_element(By.ID, "search-q").clear()
        driver.find_element(By.ID, "search-q").send_keys("Elgar")
        Select(driver.find_element(By.ID, "search-scope")).select_by_value("day")
        driver.find_element(By.ID, "search-go").click()
        _wait(
            driver,
            lambda d: d.find_element(By.ID, "results").get_attribute("data-query") == "Elgar",
            "Sunday's results",
        )
        days = {
            f.text.split("day: ")[1].split()[0]
            for f in driver.find_elements(By.CSS_SELECTOR, "#results .facts")
        }
        assert days <= {"2026-03-01"}

        # Regenerate the summary: queued.
        driver.find_element(By.ID, "regenerate").click()
        _wait(driver, lambda d: "Queued" in _text(d, "status"), "the regenerate answer")

        # Outside Telegram nothing was fetched from telegram.org, and the page logged no error.
        assert not driver.find_elements(By.CSS_SELECTOR, 'script[src*="telegram.org"]')
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []


def test_without_initdata_the_page_says_how_to_open_it(
    settings_factory: Callable[..., Settings], engine: Any
) -> None:
    with serve_seeded(settings_factory(embedder="none")) as base, chromium() as driver:
        driver.get(f"{base}/timeline")
        _wait(driver, lambda d: "send /timeline" in _text(d, "status"), "the hint")
        assert _visible_texts(driver) == []
        stale = sign_init_data(TOKEN, user={"id": ANA}, auth_date=int(NOW.timestamp()) - 2 * 86_400)
        driver.get(f"{base}/timeline#{launch_fragment(stale)}")
        driver.refresh()
        _wait(driver, lambda d: "sign-in has expired" in _text(d, "status"), "the expired sign-in")
        assert _visible_texts(driver) == []
