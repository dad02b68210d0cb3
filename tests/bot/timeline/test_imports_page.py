"""The timeline's "Bring your history": an export uploaded as the body, streamed to the data folder
under IMPORT_MAX_BYTES, previewed with nothing stored, imported in the background, its progress read
back; only by the person who uploaded it; every bad request a clear 4xx, never a 500. The API through
the real Starlette app (both databases), the page in real headless Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from sqlalchemy import func, select

from agent.core.settings import Settings
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from bot.runtime import Runtime
from db.models import ImportRun, TranscriptMessage
from tests.assistant_exports import DOG, export_bytes
from tests.bot.conftest import TOKEN
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, NOW, Seeded
from tests.bot.timeline.test_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    NO_CHROMIUM,
    _text,
    _wait,
    chromium,
    serve_seeded,
)

CAP = 200_000
UPLOAD = "/timeline/api/imports"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def timeline_settings(data_dir: Path) -> dict[str, Any]:
    return {"data_dir": str(data_dir), "import_max_bytes": CAP}


async def _lines(runtime: Runtime) -> int:
    async with runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(TranscriptMessage)) or 0)


def _files(data_dir: Path) -> list[str]:
    folder = data_dir / "imports"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.both_databases
async def test_an_uploaded_export_is_previewed_then_imported_for_its_owner_alone(
    client: httpx.AsyncClient,
    auth: Auth,
    seeded: Seeded,
    timeline_runtime: Runtime,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    before = await _lines(timeline_runtime)
    body = export_bytes("chatgpt", NOW, tmp_path)
    sent = await client.post(
        UPLOAD, content=body, headers={**auth(ANA), "X-File-Name": "chatgpt%20export.zip"}
    )
    assert sent.status_code == 200, sent.text
    preview = sent.json()
    assert preview["assistant"] == "ChatGPT" and (preview["conversations"], preview["messages"]) == (2, 6)
    assert preview["text"].startswith("This is a ChatGPT export: 2 conversations with 6 messages")
    run_id = preview["import_id"]
    assert await _lines(timeline_runtime) == before  # read, not stored
    assert _files(data_dir) == [f"{run_id}.zip"]
    # Ben, signed in as himself, finds no such run: not to read, start or cancel.
    for method, path in (("GET", ""), ("POST", "/start"), ("POST", "/cancel")):
        answer = await client.request(method, f"{UPLOAD}/{run_id}{path}", headers=auth(BEN))
        assert answer.status_code == 404, (method, path)
    started = await client.post(f"{UPLOAD}/{run_id}/start", headers=auth(ANA))
    assert started.status_code == 200 and started.json()["status"] == "running"
    await timeline_runtime.imports.wait(run_id)
    status = (await client.get(f"{UPLOAD}/{run_id}", headers=auth(ANA))).json()
    assert status["status"] == "stored" and status["messages_stored"] == 6
    assert await _lines(timeline_runtime) == before + 6
    async with timeline_runtime.sessions() as session:
        run = await session.get(ImportRun, run_id)
        assert run is not None and run.file_name == "chatgpt export.zip" and run.chat_id == ANA
    assert _files(data_dir) == []  # stored: the file is gone
    again = await client.post(f"{UPLOAD}/{run_id}/start", headers=auth(ANA))
    assert again.status_code == 409


async def test_bad_uploads_get_a_clear_4xx_and_leave_nothing(
    client: httpx.AsyncClient,
    auth: Auth,
    seeded: Seeded,
    timeline_runtime: Runtime,
    data_dir: Path,
    tmp_path: Path,
) -> None:
    before = await _lines(timeline_runtime)
    export = export_bytes("claude", NOW, tmp_path)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while streamed
        for _ in range(CAP // 10_000 + 2):
            yield b"[" + b" " * 9_999

    cases: list[tuple[int, dict[str, Any]]] = [
        (401, {"content": export}),
        (401, {"content": export, "headers": {"Authorization": "tma user=forged&hash=00"}}),
        (413, {"content": b"x" * (CAP + 1), "headers": auth(ANA)}),
        (413, {"content": chunks(), "headers": auth(ANA)}),
        (415, {"files": {"file": ("c.zip", export)}, "headers": auth(ANA)}),
        (400, {"content": b"", "headers": auth(ANA)}),
        # A Content-Length of Unicode digits ("²" passes str.isdigit) is not a size: the body decides.
        (400, {"content": b"", "headers": {**auth(ANA), "Content-Length": "\u00b2".encode("latin-1")}}),
        (400, {"content": b'{"theme": "dark"}', "headers": auth(ANA)}),
        (400, {"content": b"PK\x03\x04 a broken zip", "headers": auth(ANA)}),
        (400, {"content": b'[{"mapping": {}, "current_node": "nowhere"', "headers": auth(ANA)}),
    ]
    for status, request in cases:
        answer = await client.post(UPLOAD, **request)
        assert answer.status_code == status, (status, answer.text)
        assert answer.json()["error"], status
    assert await _lines(timeline_runtime) == before
    assert _files(data_dir) == []
    for path in ("/x/start", "/99999999999999999999", "/0"):
        assert (await client.post(f"{UPLOAD}{path}", headers=auth(ANA))).status_code in (400, 404, 405)
    # Someone who never wrote to the bot has nowhere to import to.
    stranger = await client.post(UPLOAD, content=export, headers=auth(303))
    assert stranger.status_code == 403 and _files(data_dir) == []
    # A data folder it cannot write to: 503, try later (never a 500).
    (data_dir / "imports").rmdir()
    (data_dir / "imports").write_bytes(b"in the way")
    blocked = await client.post(UPLOAD, content=export, headers=auth(ANA))
    assert blocked.status_code == 503 and blocked.json()["error"]


CHROMIUM_HERE = all(Path(p).exists() for p in (CHROMIUM, CHROMEDRIVER))


@pytest.mark.process
@pytest.mark.skipif(not CHROMIUM_HERE, reason=NO_CHROMIUM)
def test_bring_your_history_in_the_browser(
    settings_factory: Callable[..., Settings], engine: Any, tmp_path: Path
) -> None:
    settings = settings_factory(embedder="none", data_dir=str(tmp_path / "data"))
    export = tmp_path / "claude-export.zip"
    export.write_bytes(export_bytes("claude", NOW, tmp_path))
    other = tmp_path / "chatgpt-export.zip"
    other.write_bytes(export_bytes("chatgpt", NOW, tmp_path))
    init_data = sign_init_data(TOKEN, user={"id": ANA, "first_name": "Ana"}, auth_date=int(NOW.timestamp()))
    with serve_seeded(settings) as base, chromium() as driver:
        # The chat's button for a file over 20 MB opens the page at this section.
        driver.get(f"{base}/timeline?import=1#{launch_fragment(init_data)}")
        _wait(driver, lambda d: d.find_element(By.ID, "import").is_displayed(), "the import section")
        driver.find_element(By.ID, "import-file").send_keys(str(export))
        driver.find_element(By.ID, "import-upload").click()
        _wait(driver, lambda d: "Claude export" in _text(d, "import-found"), "the preview")
        assert _text(driver, "import-found").startswith(
            "This is a Claude export: 2 conversations with 4 messages"
        )
        driver.find_element(By.ID, "import-go").click()
        _wait(driver, lambda d: _text(d, "import-progress").startswith("Done:"), "the import")
        assert _text(driver, "import-progress") == (
            "Done: 2 conversations and 4 messages stored. I'll learn from them in the background."
        )
        # A second export, cancelled: nothing of it is stored.
        driver.find_element(By.ID, "import-file").send_keys(str(other))
        driver.find_element(By.ID, "import-upload").click()
        _wait(driver, lambda d: "ChatGPT export" in _text(d, "import-found"), "the second preview")
        driver.find_element(By.ID, "import-cancel").click()
        _wait(driver, lambda d: _text(d, "import-found").startswith("Cancelled"), "the cancel")
        # What was imported is searchable from the same page.
        driver.find_element(By.ID, "search-q").send_keys("Marta Porto")
        driver.find_element(By.ID, "search-go").click()
        _wait(driver, lambda d: "Marta" in _text(d, "results"), "the imported line found")
        assert DOG not in _text(driver, "results")


async def test_uploads_count_against_the_message_limits(
    client: httpx.AsyncClient, auth: Auth, seeded: Seeded, timeline_runtime: Runtime, data_dir: Path
) -> None:
    per_minute = timeline_runtime.settings.rate_limit_per_minute
    for _ in range(per_minute):
        assert (await client.post(UPLOAD, content=b"", headers=auth(ANA))).status_code == 400
    over = await client.post(UPLOAD, content=b"[]", headers=auth(ANA))
    assert over.status_code == 429 and over.json()["error"]
    assert (await client.post(UPLOAD, content=b"", headers=auth(BEN))).status_code == 400  # his own count
    assert _files(data_dir) == []
