"""Settings: defaults, URL forms, and failing at start with the setting's name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.models.test import TestModel

import agent.core.settings as settings_package
from agent.core.errors import ConfigurationError, MissingModelKeyError
from agent.core.models import provider_model
from agent.core.settings import ContextSettings, Settings, load_settings, normalise_database_url
from agent.core.settings.base import SettingsGroup


def test_defaults_are_the_embedded_ones() -> None:
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite+aiosqlite:///./data/nikita.db"
    assert settings.conversation_timeout_minutes == 15
    assert settings.model == "anthropic:claude-sonnet-5-5"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@h:5432/d", "postgresql+asyncpg://u:p@h:5432/d"),
        ("postgresql://u@h/d", "postgresql+asyncpg://u@h/d"),
        ("postgresql+asyncpg://u@h/d", "postgresql+asyncpg://u@h/d"),
        ("sqlite:///x.db", "sqlite+aiosqlite:///x.db"),
    ],
)
def test_database_urls_operators_paste_are_accepted(given: str, expected: str) -> None:
    assert normalise_database_url(given) == expected
    assert Settings(database_url=given, _env_file=None).database_url == expected


def test_missing_key_names_the_setting() -> None:
    settings = Settings(_env_file=None, anthropic_api_key=None)
    assert settings.summary_model.startswith("anthropic:")
    with pytest.raises(MissingModelKeyError, match=r"^SUMMARY_MODEL anthropic:.* needs ANTHROPIC_API_KEY"):
        provider_model(settings.summary_model, settings, setting="SUMMARY_MODEL")
    assert isinstance(provider_model("test", settings), TestModel)  # a model without a key needs none


def test_invalid_timezone_is_refused_with_the_setting_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEFAULT_TIMEZONE", "Mars/Olympus")
    with pytest.raises(ConfigurationError, match="DEFAULT_TIMEZONE"):
        load_settings()


def test_admin_ids_from_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADMIN_IDS", "1, 22,333")
    assert load_settings().admin_ids == [1, 22, 333]


@pytest.mark.process
def test_run_without_a_token_stops_at_once_naming_it(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env={"PATH": "/usr/bin:/bin", "TELEGRAM_BOT_TOKEN": "", "PYTHONPATH": _project_root()},
    )
    assert result.returncode == 2
    assert "TELEGRAM_BOT_TOKEN" in result.stderr


def _project_root() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2])


def test_a_copied_env_example_loads_with_the_defaults(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / ".env.example"
    settings = Settings(_env_file=str(example))
    defaults = Settings(_env_file=None)
    assert settings.model_dump() == defaults.model_dump()
    assert settings.webhook_url is None and settings.telegram_bot_token is None


def test_env_example_sets_only_the_first_run_and_lists_every_other_setting_at_its_default(
    tmp_path: Path,
) -> None:
    text = (Path(__file__).resolve().parents[2] / ".env.example").read_text(encoding="utf-8")
    set_lines = re.findall(r"^([A-Z][A-Z0-9_]*)=", text, re.MULTILINE)
    assert set_lines == ["TELEGRAM_BOT_TOKEN", "ANTHROPIC_API_KEY", "ADMIN_IDS"]
    commented = re.findall(r"^# ([A-Z][A-Z0-9_]*=.*)$", text, re.MULTILINE)
    names = {(field.alias or name).upper() for name, field in Settings.model_fields.items()}
    listed = set(set_lines) | {line.split("=", 1)[0] for line in commented}
    assert names - listed == {"K_SERVICE", "DYNO"}  # set by the platform, never by the operator
    # Uncommented, every listed value is the default: the comments tell the truth.
    uncommented = tmp_path / ".env"
    uncommented.write_text("\n".join(commented) + "\n", encoding="utf-8")
    assert Settings(_env_file=str(uncommented)).model_dump() == Settings(_env_file=None).model_dump()


def test_data_dir_holds_the_database_and_the_graph_unless_they_are_set() -> None:
    moved = Settings(_env_file=None, data_dir="/srv/nikita/")
    assert moved.database_url == "sqlite+aiosqlite:////srv/nikita/nikita.db"
    assert moved.graph_path == "/srv/nikita/graph.db"
    assert "database_url" not in moved.model_fields_set  # still "not set" for the storage checks
    named = Settings(
        _env_file=None, data_dir="/srv/nikita", database_url="postgres://u@h/d", graph_path="g.db"
    )
    assert named.database_url == "postgresql+asyncpg://u@h/d" and named.graph_path == "g.db"


def test_every_setting_is_in_exactly_one_group_and_a_group_reads_it_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    groups = [c for c in Settings.__mro__[1:] if issubclass(c, SettingsGroup) and c is not SettingsGroup]
    # Every group the package names is part of the whole, and nothing else is.
    named = {name for name in settings_package.__all__ if name.endswith("Settings") and name != "Settings"}
    assert {group.__name__ for group in groups} == named
    grouped = [name for group in groups for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields)
    monkeypatch.setenv("CONTEXT_TOTAL_BUDGET", "5000")
    assert ContextSettings(_env_file=None).context_total_budget == 5000
    assert Settings(_env_file=None).context_total_budget == 5000


# Each renamed setting: its environment name, the accepted alias, the field, a value not its default.
RENAMED = [
    ("CONVERSATION_TIMEOUT_MINUTES", "SESSION_TIMEOUT_MINUTES", "conversation_timeout_minutes", "40"),
    ("HISTORY_CACHE_CONVERSATIONS", "HISTORY_CACHE_SESSIONS", "history_cache_conversations", "12"),
    ("CONTEXT_FACTS_BUDGET", "CONTEXT_RECALL_BUDGET", "context_facts_budget", "444"),
    ("CONTEXT_FACTS_BUDGET", "CONTEXT_MEMORY_BUDGET", "context_facts_budget", "444"),
    ("CONTEXT_FACTS_TIMEOUT_SECONDS", "CONTEXT_RECALL_TIMEOUT_SECONDS", "context_facts_timeout_seconds", "7"),
    ("CONTEXT_FACTS_TIMEOUT_SECONDS", "CONTEXT_MEMORY_TIMEOUT_SECONDS", "context_facts_timeout_seconds", "7"),
    ("PROFILE_TOKENS", "CONTEXT_PROFILE_BUDGET", "profile_tokens", "333"),
    ("VOICE_NOTE_MAX_BYTES", "VOICE_MAX_BYTES", "voice_note_max_bytes", "1234"),
    ("TOUCHPOINT_ENABLED", "PROACTIVE_ENABLED", "touchpoint_enabled", "false"),
    ("TOUCHPOINT_MAX_PER_WEEK", "PROACTIVE_MAX_PER_WEEK", "touchpoint_max_per_week", "5"),
    ("TOUCHPOINT_QUIET_START_HOUR", "PROACTIVE_QUIET_START_HOUR", "touchpoint_quiet_start_hour", "21"),
    ("TOUCHPOINT_QUIET_END_HOUR", "PROACTIVE_QUIET_END_HOUR", "touchpoint_quiet_end_hour", "7"),
    ("TOUCHPOINT_CHECK_IN_DAYS", "PROACTIVE_CHECK_IN_DAYS", "touchpoint_check_in_days", "4"),
    ("TOUCHPOINT_BATCH_LIMIT", "PROACTIVE_BATCH_LIMIT", "touchpoint_batch_limit", "9"),
    ("TOUCHPOINT_LEASE_SECONDS", "PROACTIVE_LEASE_SECONDS", "touchpoint_lease_seconds", "33.0"),
    ("TOUCHPOINT_SEND_PER_SECOND", "PROACTIVE_SEND_PER_SECOND", "touchpoint_send_per_second", "2.5"),
    ("TOUCHPOINT_REPLY_WINDOW_HOURS", "PROACTIVE_REPLY_WINDOW_HOURS", "touchpoint_reply_window_hours", "6.0"),
]


@pytest.mark.parametrize(("name", "alias", "field", "value"), RENAMED)
def test_a_renamed_setting_is_read_by_its_name_and_by_its_alias(
    monkeypatch: pytest.MonkeyPatch, name: str, alias: str, field: str, value: str
) -> None:
    default = getattr(Settings(_env_file=None), field)
    expected = (value == "true") if isinstance(default, bool) else type(default)(value)
    assert expected != default
    for env in (name, alias):
        monkeypatch.setenv(env, value)
        assert getattr(Settings(_env_file=None), field) == expected, env
        monkeypatch.delenv(env)
    # Both set: the name wins over the alias.
    monkeypatch.setenv(name, value)
    monkeypatch.setenv(alias, str(default))
    assert getattr(Settings(_env_file=None), field) == expected
    # And by the field's name, as code and tests build settings.
    monkeypatch.delenv(name)
    monkeypatch.delenv(alias)
    assert getattr(Settings(_env_file=None, **{field: value}), field) == expected


def test_the_docs_name_every_alias() -> None:
    root = Path(__file__).resolve().parents[2]
    for page in (root / "docs" / "configuration.md", root / ".env.example"):
        text = page.read_text(encoding="utf-8")
        for name, alias, _, _ in RENAMED:
            assert re.search(rf"\b{name}\b", text) and re.search(rf"\b{alias}\b", text), (page.name, alias)
