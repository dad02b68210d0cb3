"""The context builder: loads every tier concurrently, compacts the history, fits the budget.

Each tier runs in its own DB session (an `AsyncSession` is not safe to share between tasks) under
its own timeout. A tier that fails or times out is left out and recorded; the turn goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.budget import Budgets, Fitted, fit
from agent.context.compaction import Compacted, Compactor
from agent.context.memory import MemoryTierSource, limits_for_budget
from agent.context.tiers import (
    LOADED_TIERS,
    TierBlock,
    load_last_conversation,
    load_threads,
    load_today,
    load_yesterday,
    memory_block,
    profile_block,
    time_block,
)
from agent.core.errors import NikitaError
from agent.core.settings import Settings
from agent.history.tokens import TokenCounter, get_counter
from db.models import Conversation, User

logger = logging.getLogger(__name__)

# What a tier may raise that must not break the turn: storage, time, bad stored data, the graph.
TIER_ERRORS = (SQLAlchemyError, OSError, TimeoutError, NikitaError, ValueError, TypeError, KeyError)


@dataclass(frozen=True)
class BuiltContext:
    """The instructions text, the history to send, and the snapshot describing both."""

    text: str
    snapshot: dict[str, Any] = field(default_factory=dict)
    # None on a session's first message: PydanticAI then starts the run fresh.
    history: list[ModelMessage] | None = None
    # The fitted tiers by name (what `text` shows), for surfaces that lay them out their own way.
    blocks: dict[str, TierBlock] = field(default_factory=dict)


@dataclass(frozen=True)
class _Loaded:
    name: str
    block: TierBlock | None
    status: str
    ms: float
    error: str | None = None


def _default_summary_model(settings: Settings) -> Model | str | None:
    """The summary model from settings, or None (compaction off) when it cannot be built."""
    from agent.chat.agent import build_model

    if settings.summary_model.startswith("anthropic:") and settings.anthropic_api_key is None:
        return None
    try:
        return build_model(settings.summary_model, settings)
    except (UserError, ValueError, ImportError) as exc:
        logger.warning("summary model unavailable, compaction off", exc_info=exc)
        return None


class ContextBuilder:
    """Builds each turn's context: the tiers, the compacted history, fitted to the budgets."""

    def __init__(
        self,
        settings: Settings,
        *,
        memory: MemoryTierSource | None = None,
        summary_model: Model | str | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.settings = settings
        self.memory = memory
        self.counter = counter or get_counter()
        self.budgets = Budgets.from_settings(settings)
        model = summary_model if summary_model is not None else _default_summary_model(settings)
        self.compactor = Compactor(settings, model=model, counter=self.counter)

    async def build(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        user: User,
        conversation: Conversation | None,
        text: str,
        now: datetime,
        previous_message_at: datetime | None,
        history: Sequence[ModelMessage] = (),
    ) -> BuiltContext:
        """Assemble the context for this message; never raises for a tier's failure.

        `conversation` is None outside a session (a voice call starting): "last conversation" is
        then the newest one, and there is no history to compact.
        """
        started = time.perf_counter()
        s = self.settings
        # What history will take at most, counted from the newest message: the rest picks memory limits.
        estimate = 0
        for message in reversed(history):
            estimate += self.counter.count_message(message)
            if estimate >= self.budgets.history:
                estimate = self.budgets.history
                break
        remaining = self.budgets.hard_cap - estimate
        loaders: dict[str, tuple[float, Callable[[], Awaitable[TierBlock | None]]]] = {
            "today": (
                s.context_today_timeout_seconds,
                lambda: self._in_session(
                    sessions,
                    lambda db: load_today(
                        db,
                        user,
                        now,
                        key_moments=s.context_today_key_moments,
                        conversation_id=conversation.id if conversation is not None else None,
                        raw_budget=self.budgets.tiers["today"],
                        count=self.counter.count,
                    ),
                ),
            ),
            "yesterday": (
                s.context_yesterday_timeout_seconds,
                lambda: self._in_session(sessions, lambda db: load_yesterday(db, user, now)),
            ),
            "threads": (
                s.context_threads_timeout_seconds,
                lambda: self._in_session(
                    sessions, lambda db: load_threads(db, user, now, limit=s.context_threads_max)
                ),
            ),
            "last_conversation": (
                s.context_last_conversation_timeout_seconds,
                lambda: self._in_session(
                    sessions,
                    lambda db: load_last_conversation(
                        db,
                        user,
                        conversation.id if conversation is not None else None,
                        now,
                        min_gap=timedelta(hours=s.context_last_conversation_after_hours),
                    ),
                ),
            ),
            "memory": (s.context_memory_timeout_seconds, lambda: self._memory(user.id, text, now, remaining)),
        }
        assert tuple(loaders) == LOADED_TIERS
        conversation_id = conversation.id if conversation is not None else None
        compaction_task = self._compact(sessions, user.id, conversation_id, history, now)
        results = await asyncio.gather(
            *(self._guarded(name, timeout, load) for name, (timeout, load) in loaders.items()),
            compaction_task,
        )
        loaded: list[_Loaded] = list(results[:-1])  # type: ignore[arg-type]
        compacted: Compacted = results[-1]  # type: ignore[assignment]
        fixed = [time_block(user, now, previous_message_at)]
        if (profile := profile_block(user)) is not None:
            fixed.append(profile)
        tiers = {r.name: r.block for r in loaded if r.block is not None}
        fitted = fit(fixed, tiers, compacted.messages, budgets=self.budgets, counter=self.counter)
        build_ms = (time.perf_counter() - started) * 1000
        snapshot = self._snapshot(loaded, compacted, fitted, len(history), remaining, build_ms)
        logger.info(
            "context built",
            extra={
                "user_id": user.id,
                "conversation_id": conversation_id,
                "tokens": fitted.total_tokens,
                "build_ms": round(build_ms, 2),
            },
        )
        return BuiltContext(
            text=fitted.text, snapshot=snapshot, history=fitted.history or None, blocks=dict(fitted.blocks)
        )

    async def _in_session(
        self,
        sessions: async_sessionmaker[AsyncSession],
        load: Callable[[AsyncSession], Awaitable[TierBlock | None]],
    ) -> TierBlock | None:
        async with sessions() as session:
            return await load(session)

    async def _memory(self, user_id: int, text: str, now: datetime, remaining: int) -> TierBlock | None:
        if self.memory is None:
            return None
        lines = await self.memory.search(user_id, text, limits=limits_for_budget(remaining), now=now)
        return memory_block(list(lines))

    async def _guarded(
        self, name: str, limit_seconds: float, load: Callable[[], Awaitable[TierBlock | None]]
    ) -> _Loaded:
        started = time.perf_counter()

        def ms() -> float:
            return round((time.perf_counter() - started) * 1000, 2)

        try:
            block = await asyncio.wait_for(load(), timeout=limit_seconds)
        except TimeoutError:
            logger.warning("context tier timed out", extra={"tier": name, "timeout": limit_seconds})
            return _Loaded(name, None, "timeout", ms(), f"timed out after {limit_seconds:g} s")
        except TIER_ERRORS as exc:
            logger.warning("context tier failed", extra={"tier": name}, exc_info=exc)
            return _Loaded(name, None, "failed", ms(), f"{type(exc).__name__}: {exc}"[:300])
        if name == "memory" and self.memory is None:
            return _Loaded(name, None, "not configured", ms())
        return _Loaded(name, block, "ok" if block is not None else "empty", ms())

    async def _compact(
        self,
        sessions: async_sessionmaker[AsyncSession],
        user_id: int,
        conversation_id: int | None,
        history: Sequence[ModelMessage],
        now: datetime,
    ) -> Compacted:
        if not history or conversation_id is None:
            return Compacted([], "not needed")
        try:
            return await self.compactor.compact(
                sessions, user_id=user_id, conversation_id=conversation_id, history=history, now=now
            )
        except TIER_ERRORS as exc:
            # The cache could not be read or written: plain truncation, as on a summary failure.
            logger.warning("compaction unavailable", exc_info=exc)
            return Compacted(list(history), "failed", error=f"{type(exc).__name__}: {exc}"[:300])

    def _snapshot(
        self,
        loaded: list[_Loaded],
        compacted: Compacted,
        fitted: Fitted,
        stored_count: int,
        remaining: int,
        build_ms: float,
    ) -> dict[str, Any]:
        tiers: dict[str, dict[str, Any]] = {}
        for name in ("time", "profile"):
            tiers[name] = {
                "present": name in fitted.blocks,
                "count": len(fitted.blocks[name].items) if name in fitted.blocks else 0,
                "tokens": fitted.block_tokens.get(name, 0),
                "status": "ok",
            }
        for r in loaded:
            block = fitted.blocks.get(r.name)
            entry: dict[str, Any] = {
                "present": block is not None,
                "count": len(block.items) if block is not None else 0,
                "loaded": len(r.block.items) if r.block is not None else 0,
                "tokens": fitted.block_tokens.get(r.name, 0),
                "status": r.status,
                "ms": r.ms,
            }
            if r.error:
                entry["error"] = r.error
            tiers[r.name] = entry
        if self.memory is not None:
            tiers["memory"]["limits"] = limits_for_budget(remaining).name
        failures = [{"tier": r.name, "status": r.status, "error": r.error} for r in loaded if r.error]
        if compacted.error:
            failures.append({"tier": "compaction", "status": compacted.status, "error": compacted.error})
        threads = fitted.blocks.get("threads")
        return {
            "message_history_count": len(fitted.history),
            "message_history_tokens": fitted.history_tokens,
            "history": {
                "stored_messages": stored_count,
                "sent_messages": len(fitted.history),
                "tokens": fitted.history_tokens,
                "dropped_messages": fitted.history_dropped_messages,
                "trimmed_tool_outputs": fitted.history_trimmed_tool_outputs,
                "compaction": {
                    "status": compacted.status,
                    "covered_messages": compacted.covered_messages,
                    "summary_tokens": compacted.summary_tokens,
                    "ms": compacted.ms,
                },
            },
            "tiers": tiers,
            "today_summary_present": "today" in fitted.blocks,
            "open_threads_count": len(threads.items) if threads is not None else 0,
            "last_conversation_present": "last_conversation" in fitted.blocks,
            "cuts": [dataclasses.asdict(c) for c in fitted.cuts],
            "failures": failures,
            "instructions_tokens": fitted.text_tokens,
            "total_tokens": fitted.total_tokens,
            "budget": {"total": self.budgets.total, "hard_cap": self.budgets.hard_cap},
            "build_ms": round(build_ms, 2),
        }
