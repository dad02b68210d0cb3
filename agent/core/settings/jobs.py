"""Settings of background work: post-processing, day summaries, touchpoints, reminders."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent.core.settings.base import SettingsGroup, aliased


def _touchpoint(name: str, **field: Any) -> Any:
    """TOUCHPOINT_<NAME>, or its alias PROACTIVE_<NAME> when that is unset."""
    return aliased(f"touchpoint_{name}", f"proactive_{name}", **field)


class JobSettings(SettingsGroup):
    """POSTPROCESS_*, CONSOLIDATE_*, EXTRACTION_*, DAY_*, NIGHTLY_INTERVAL_MINUTES, IMPORT_*,
    TOUCHPOINT_* and REMINDERS_*."""

    # Post-processing and day summaries
    postprocess_max_attempts: int = 5
    postprocess_retry_base_seconds: float = 60.0
    postprocess_retry_max_seconds: float = 3600.0
    postprocess_claim_timeout_seconds: float = 900.0
    postprocess_batch_limit: int = 200
    # Tidying an owner's facts after they changed (docs/postprocessing.md#kept-tidy): at most this
    # many owners per scheduled run, and at most this many of an owner's facts (the most recently
    # said) in its one model call. Retries, attempts and the lease follow POSTPROCESS_*.
    consolidate_batch_limit: int = Field(default=100, ge=1)
    consolidate_max_facts: int = Field(default=300, ge=2)
    # Extraction is shown the owner's current facts to say whether each fact it finds is new, the
    # same, an update or a contradiction: at most this many tokens of them, and never more than this
    # share of the rest of its input.
    extraction_known_facts_tokens: int = Field(default=400, ge=0)
    extraction_known_facts_share: float = Field(default=0.15, ge=0.0, le=1.0)
    day_summary_message_threshold: int = 10
    day_raw_token_budget: int = 4000
    nightly_interval_minutes: int = 15
    # Conversations brought from another assistant's export (docs/import.md) are post-processed at
    # the operator's pace: each run of the `imports` job keeps at most IMPORT_CONVERSATIONS_PER_RUN of
    # them in the post-processing queue (0: imports wait), and queues none for a person whose import
    # spend today (UTC, model tokens metered as "import") reached IMPORT_DAILY_TOKENS (0: no cap). That
    # spend is counted apart: it never takes from the person's USER_DAILY_TOKENS for chat.
    import_conversations_per_run: int = Field(default=10, ge=0)
    import_daily_tokens: int = Field(default=300_000, ge=0)

    # Touchpoints (docs/touchpoints.md): post-processing plans follow-ups from open threads; the
    # `touchpoints` job sends the due ones. TOUCHPOINT_ENABLED is every user's default (/followups
    # changes theirs). Quiet hours are local hours [start, end); at most one a day and
    # TOUCHPOINT_MAX_PER_WEEK in any 7 days. TOUCHPOINT_CHECK_IN_DAYS > 0 plans one check-in on the best
    # open thread of a user quiet that many days (0: off). Each PROACTIVE_* name is read as an alias.
    touchpoint_enabled: bool = _touchpoint("enabled", default=True)
    touchpoint_max_per_week: int = _touchpoint("max_per_week", default=3)
    touchpoint_quiet_start_hour: int = _touchpoint("quiet_start_hour", default=22, ge=0, le=23)
    touchpoint_quiet_end_hour: int = _touchpoint("quiet_end_hour", default=9, ge=0, le=23)
    touchpoint_check_in_days: int = _touchpoint("check_in_days", default=0)
    touchpoint_batch_limit: int = _touchpoint("batch_limit", default=100)
    touchpoint_lease_seconds: float = _touchpoint("lease_seconds", default=120.0)
    touchpoint_send_per_second: float = _touchpoint("send_per_second", default=25.0)
    # A touchpoint stays the open conversation this long, so a late reply reads it in history.
    touchpoint_reply_window_hours: float = _touchpoint("reply_window_hours", default=24.0)
    # Reminders the user sets (docs/reminders.md) go out through the same job at their local time,
    # without quiet hours or the touchpoint caps: at most REMINDERS_PER_DAY reminder messages to one
    # user in one local day, and REMINDERS_MAX_ACTIVE active reminders per user.
    reminders_per_day: int = Field(default=24, ge=1)
    reminders_max_active: int = Field(default=50, ge=1)
