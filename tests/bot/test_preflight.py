"""The start-up checks, one by one, against the fake Bot API, the fake Anthropic API and real databases."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import ConfigurationError, StartupError
from agent.core.settings import Settings
from bench.fakes.anthropic_api import FakeAnthropic, Lifecycle
from bench.fakes.telegram_api import FakeTelegram
from bot.preflight import check_anthropic, check_database, check_telegram, listen, one_line, preflight

TOKEN = "123:ABC"


def closed_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settings(**values: Any) -> Settings:
    base: dict[str, Any] = {
        "_env_file": None,
        "telegram_bot_token": TOKEN,
        "model": "anthropic:claude-sonnet-4-5",
        "summary_model": "anthropic:claude-haiku-4-5",
        "anthropic_api_key": "sk-right",
        "startup_check_timeout_seconds": 3,
    }
    return Settings(**(base | values))


@pytest.fixture
def anthropic_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key="sk-right") as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


async def test_telegram_taking_the_token_passes(tg: FakeTelegram) -> None:
    await check_telegram(settings(telegram_api_base_url=tg.base_url))
    assert [call.method for call in tg.calls] == ["getMe"]


async def test_a_refused_token_names_the_setting_and_never_shows_it(tg: FakeTelegram) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await check_telegram(settings(telegram_api_base_url=tg.base_url, telegram_bot_token="999:WRONG"))
    message = str(caught.value)
    assert message.startswith("TELEGRAM_BOT_TOKEN was refused by Telegram at 127.0.0.1:")
    assert "@BotFather" in message and "999:WRONG" not in message


async def test_telegram_out_of_reach_names_the_host_and_the_error() -> None:
    base = f"http://127.0.0.1:{closed_port()}/bot"
    with pytest.raises(StartupError) as caught:
        await check_telegram(settings(telegram_api_base_url=base))
    message = str(caught.value)
    assert message.startswith(f"cannot reach Telegram at 127.0.0.1:{base.split(':')[2].split('/')[0]} (")
    assert "ConnectError" in message and "TELEGRAM_API_BASE_URL" in message


async def test_anthropic_checks_each_anthropic_model_with_the_key(anthropic_fake: FakeAnthropic) -> None:
    await check_anthropic(settings())
    asked = sorted(r.path for r in anthropic_fake.requests)
    assert asked == ["/v1/models/claude-haiku-4-5", "/v1/models/claude-sonnet-4-5"]
    keys = {r.headers.get("x-api-key") or r.headers.get("authorization") for r in anthropic_fake.requests}
    assert keys <= {"sk-right", "Bearer sk-right"}


async def test_other_providers_are_not_called(anthropic_fake: FakeAnthropic) -> None:
    await check_anthropic(settings(model="test", summary_model="openai-chat:gpt-4o", anthropic_api_key=None))
    assert anthropic_fake.requests == []


async def test_a_refused_key_names_the_setting(anthropic_fake: FakeAnthropic) -> None:
    refused = r"^ANTHROPIC_API_KEY was refused by Anthropic at 127\.0\.0\.1"
    with pytest.raises(ConfigurationError, match=refused):
        await check_anthropic(settings(anthropic_api_key="sk-wrong"))


async def test_an_unknown_model_names_its_setting(anthropic_fake: FakeAnthropic) -> None:
    with pytest.raises(ConfigurationError) as caught:
        await check_anthropic(settings(summary_model="anthropic:sonnet-4-5"))
    assert str(caught.value).startswith("SUMMARY_MODEL sonnet-4-5 is not a model Anthropic knows")


async def test_a_retired_model_is_refused_and_a_deprecated_one_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    models: dict[str, Lifecycle] = {"claude-sonnet-4-5": "deprecated", "claude-3-haiku-20240307": "retired"}
    with FakeAnthropic(models=models) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        await check_anthropic(settings(summary_model="test"))
        with pytest.raises(ConfigurationError, match="SUMMARY_MODEL claude-3-haiku-20240307 was retired"):
            await check_anthropic(settings(summary_model="anthropic:claude-3-haiku-20240307"))


async def test_anthropic_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(StartupError, match=rf"^cannot reach Anthropic at 127\.0\.0\.1:{port} \("):
        await check_anthropic(settings())


async def test_a_new_sqlite_database_is_left_to_the_migration_so_a_failed_start_leaves_no_file(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    await check_database(settings(data_dir=str(data)))
    assert not data.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = r"is not a writable folder\): set DATABASE_URL, or make .* writable"
    with pytest.raises(StartupError, match=unwritable):
        await check_database(settings(data_dir=str(blocker / "data")))
    named = tmp_path / "named.db"
    await check_database(settings(database_url=f"sqlite:///{named}"))
    assert not named.exists()


async def test_a_database_out_of_reach_names_its_host_but_not_the_password() -> None:
    port = closed_port()
    url = f"postgresql://nikita:hunter2secret@127.0.0.1:{port}/nikita"
    with pytest.raises(StartupError) as caught:
        await check_database(settings(database_url=url))
    message = str(caught.value)
    assert message.startswith(f"cannot reach the database at 127.0.0.1:{port} (")
    assert "DATABASE_URL" in message and "hunter2secret" not in message and "\n" not in message


async def test_a_database_refusing_the_user_says_so(postgres_url: str | None) -> None:
    if postgres_url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    host = postgres_url.split("@", 1)[1].split("/", 1)[0]
    wrong_user = postgres_url.replace("://postgres@", "://nobody_here:pw@")
    with pytest.raises(StartupError, match='role "nobody_here" does not exist') as caught:
        await check_database(settings(database_url=wrong_user))
    assert f"at {host} (" in str(caught.value)
    await check_database(settings(database_url=postgres_url))


async def test_preflight_reports_telegram_first_when_nothing_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    everything_down = settings(
        telegram_api_base_url=f"http://127.0.0.1:{closed_port()}/bot",
        database_url=f"postgresql://postgres@127.0.0.1:{closed_port()}/x",
    )
    with pytest.raises(StartupError, match=r"^cannot reach Telegram"):
        await preflight(everything_down)


def test_a_port_in_use_is_one_line() -> None:
    with listen(closed_port()) as held:
        held.listen()  # another server on the port
        in_use = r"^cannot listen on PORT \d+ \(OSError: .*\): another process"
        with pytest.raises(StartupError, match=in_use):
            listen(held.getsockname()[1])


def test_one_line_drops_sqlalchemy_boilerplate_and_masks() -> None:
    from sqlalchemy.exc import OperationalError

    error = OperationalError("SELECT 1", {}, Exception("boom\nat pw-123"))
    assert one_line(error, hide="pw-123") == "OperationalError: (builtins.Exception) boom at ***"


def test_migrate_names_the_database_it_cannot_reach(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bot.__main__ import main

    monkeypatch.chdir(tmp_path)
    port = closed_port()
    monkeypatch.setenv("DATABASE_URL", f"postgresql://nikita:hunter2secret@127.0.0.1:{port}/nikita")
    assert main(["migrate"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"start-up check failed: cannot reach the database at 127.0.0.1:{port} (")
    assert "hunter2secret" not in line
