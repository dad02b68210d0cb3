"""Commands build only the models they call, and a model they cannot build stops them in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.__main__ import main


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh directory with its own SQLite database, the default (anthropic:) models and no key."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for name in ("MODEL", "SUMMARY_MODEL", "LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/jobs.db")
    return tmp_path


def test_a_job_that_calls_no_model_runs_without_a_key(
    keyless: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    capsys.readouterr()
    # The conversation job by its retired name, which an operator may still type.
    assert main(["jobs", "run", "sessions"]) == 0
    assert json.loads(capsys.readouterr().out) == {"job": "sessions", "closed": 0}


def test_a_job_that_needs_the_missing_key_names_the_setting_in_one_line(
    keyless: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["jobs", "run", "postprocess"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("configuration error: SUMMARY_MODEL anthropic:")
    assert "ANTHROPIC_API_KEY" in line and "SUMMARY_MODEL=demo" in line


def test_an_unknown_model_string_is_one_line_and_leaves_no_file(
    keyless: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["chat", "--model", "foo"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("configuration error: MODEL 'foo' is not a model PydanticAI knows")
    assert list(keyless.iterdir()) == []
