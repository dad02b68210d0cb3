"""Deprecated models: the SDK's end-of-life dates, the start-up warning, and the defaults' standing."""

from __future__ import annotations

from datetime import date

import pytest
from anthropic.types import ModelParam
from genai_prices import Usage, calc_price
from pydantic_ai.models import known_model_names

from agent.core.model_lifecycle import deprecated_models, model_warnings, parse_end_of_life, sampling_allowed
from agent.core.settings import Settings
from agent.digest.summaries import summary_model_settings


def _settings(**values: str) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def test_the_sdks_dates_parse() -> None:
    assert parse_end_of_life("November 30th, 2026") == date(2026, 11, 30)
    assert parse_end_of_life("July 21st, 2025") == date(2025, 7, 21)
    assert parse_end_of_life("June 2nd, 2026") == date(2026, 6, 2)
    assert parse_end_of_life("sometime next year") is None
    # Every date the installed SDK ships is in a form we read.
    assert all(parse_end_of_life(text) is not None for text in deprecated_models().values())


def test_a_deprecated_model_warns_with_its_end_of_life_and_the_fix() -> None:
    settings = _settings(model="anthropic:claude-sonnet-4-5")
    assert model_warnings(settings, date(2026, 11, 24)) == [
        "MODEL anthropic:claude-sonnet-4-5 is deprecated and reaches end of life on 2026-11-30: "
        "set MODEL to anthropic:claude-sonnet-5-5"
    ]


def test_past_end_of_life_says_so() -> None:
    settings = _settings(
        model="anthropic:claude-sonnet-4-5", summary_model="anthropic:claude-3-5-haiku-latest"
    )
    lines = model_warnings(settings, date(2026, 12, 1))
    assert lines == [
        "MODEL anthropic:claude-sonnet-4-5 reached end of life on 2026-11-30 and no longer answers: "
        "set MODEL to anthropic:claude-sonnet-5-5",
        "SUMMARY_MODEL anthropic:claude-3-5-haiku-latest reached end of life on 2026-02-19 and no longer "
        "answers: set SUMMARY_MODEL to anthropic:claude-haiku-5-5",
    ]


def test_an_unknown_date_format_still_warns() -> None:
    settings = _settings(summary_model="anthropic:claude-old")
    lines = model_warnings(settings, date(2026, 11, 24), table={"claude-old": "end of Q3"})
    assert lines == [
        "SUMMARY_MODEL anthropic:claude-old is deprecated (end of life: end of Q3): "
        "set SUMMARY_MODEL to anthropic:claude-haiku-5-5"
    ]


def test_current_and_other_providers_models_do_not_warn() -> None:
    assert model_warnings(_settings(), date(2026, 11, 24)) == []
    assert model_warnings(_settings(model="test", summary_model="openai:gpt-5"), date(2030, 1, 1)) == []


@pytest.mark.parametrize("setting", ["model", "summary_model"])
def test_the_defaults_are_known_supported_and_priced(setting: str) -> None:
    default: str = Settings.model_fields[setting].default
    name = default.removeprefix("anthropic:")
    assert name in ModelParam.__args__[0].__args__  # type: ignore[attr-defined]
    assert name not in deprecated_models()
    assert default in known_model_names()
    price = calc_price(Usage(input_tokens=1000, output_tokens=1000), model_ref=name, provider_id="anthropic")
    assert price.model.id == name and price.total_price > 0


def test_summary_calls_leave_temperature_out_where_the_model_refuses_it() -> None:
    assert not sampling_allowed("anthropic:claude-haiku-5-5")
    assert "temperature" not in summary_model_settings(_settings(summary_model="anthropic:claude-haiku-5-5"))
    older = summary_model_settings(_settings(summary_model="anthropic:claude-haiku-4-5"))
    assert older.get("temperature") == 0.2
