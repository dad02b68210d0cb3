"""Settings of what a turn sends the model: token budgets, context tiers, the context engine, compaction."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from agent.core.settings.base import SettingsGroup, aliased


class ContextSettings(SettingsGroup):
    """HISTORY_*, TOOL_OUTPUT_MAX_TOKENS, CONTEXT_*, MODEL_CONTEXT_WINDOW and COMPACTION_*."""

    # Token budgets
    history_token_budget: int = 3000
    history_min_tokens: int = 100
    tool_output_max_tokens: int = 300
    context_total_budget: int = 4100
    context_hard_cap: int = 6150

    # The context: per-tier token budgets (over the total, tiers are cut in the order
    # thoughts -> last conversation -> threads -> facts -> yesterday -> today -> history), per-tier load
    # timeouts (a tier that times out is left out), and history compaction.
    context_today_budget: int = 500
    context_yesterday_budget: int = 300
    context_threads_budget: int = 400
    context_last_conversation_budget: int = 300
    # The facts tier: the facts found for this message (CONTEXT_RECALL_BUDGET and CONTEXT_MEMORY_BUDGET
    # are read as aliases).
    context_facts_budget: int = aliased(
        "context_facts_budget", "context_recall_budget", "context_memory_budget", default=600
    )
    # The profile (`<about_them>`): onboarding's answers, then the person's facts, most important
    # first, as of the conversation's start (agent/memory/profile.py); what does not fit may be found per
    # message and listed in the context snapshot.
    # CONTEXT_PROFILE_BUDGET is read as an alias.
    profile_tokens: int = aliased("profile_tokens", "context_profile_budget", default=700, ge=50)
    context_thoughts_budget: int = 150
    context_today_key_moments: int = 5
    context_threads_max: int = 5
    context_last_conversation_after_hours: float = 24.0
    context_today_timeout_seconds: float = 2.0
    context_yesterday_timeout_seconds: float = 2.0
    context_threads_timeout_seconds: float = 2.0
    context_last_conversation_timeout_seconds: float = 2.0
    # CONTEXT_RECALL_TIMEOUT_SECONDS and CONTEXT_MEMORY_TIMEOUT_SECONDS are read as aliases.
    context_facts_timeout_seconds: float = aliased(
        "context_facts_timeout_seconds",
        "context_recall_timeout_seconds",
        "context_memory_timeout_seconds",
        default=3.0,
    )
    context_thoughts_timeout_seconds: float = 2.0
    context_week_timeout_seconds: float = 2.0
    context_follow_ups_timeout_seconds: float = 2.0
    # The context engine: v1 renders the tiers each turn; v2 serves the briefing written in idle
    # time (agent/context/briefing/writer.py); shadow serves v1 and records v2 beside it; canary serves v2
    # to CONTEXT_ENGINE_CANARY_PERCENT of users (the same users every time) and v1 to the rest.
    context_engine: Literal["v1", "v2", "shadow", "canary"] = "v1"
    context_engine_canary_percent: Annotated[int, Field(ge=0, le=100)] = 10
    context_briefing_budget: int = 700
    context_briefing_voice_budget: int = 300
    model_context_window: int = 200_000
    compaction_enabled: bool = True
    compaction_threshold: float = 0.7
    compaction_keep_ratio: float = 0.3
    compaction_summary_max_tokens: int = 500
    compaction_input_max_tokens: int = 12_000
    compaction_timeout_seconds: float = 15.0
    # The per-user cache of stored history, bounded by entries and bytes (least recently used out).
    # HISTORY_CACHE_SESSIONS is read as an alias.
    history_cache_conversations: int = aliased(
        "history_cache_conversations", "history_cache_sessions", default=256
    )
    history_cache_max_bytes: int = 16_000_000
