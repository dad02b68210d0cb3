"""Compaction: older turns become one summary once a conversation's history is long.

When the history passes `compaction_threshold` of the window it lives in (the smaller of the
model's context window and the history budget), the older turns, with system parts and earlier
injected recall (recall tool calls, an earlier summary) removed, are summarised by the summary
model. The summary rides in a request-side `CompactionPart` at the head of the kept turns: PydanticAI
sends it to every provider as user text tagged `<pyai:conversation_summary>`. Only what the model is
sent changes; the stored history and the transcript never do.

The summary is cached in `history_compactions` by the last message it covers, so later turns reuse
it until the verbatim tail grows past the threshold again; then the old summary and the turns
since are folded into a new one (incremental, never the whole conversation again). On timeout or
failure the caller falls back to plain truncation.

Why not `ProcessHistory`: it runs on every model request inside the run and writes its result back
into the run's messages, which would shift `new_messages()` and what we persist; compaction needs
a database cache and one timeout per turn, so it runs once before the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic_ai import Agent
from pydantic_ai.exceptions import AgentRunError, UserError
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.budget import truncate_text
from agent.core.caching import static_cache_settings
from agent.core.model_lifecycle import sampling_allowed
from agent.core.settings import Settings
from agent.core.tokens import TokenCounter
from agent.core.usage import record_run
from agent.digest.groups import for_owner
from agent.history.messages import sanitize_history
from agent.history.turn_notes import words
from agent.history.window import turn_starts
from db.models import HistoryCompaction
from db.repositories.users import user_present

logger = logging.getLogger(__name__)

# Tools whose results are recall injected earlier: summarising them again would echo old memory.
RECALL_TOOLS = frozenset({"conversation_search", "conversation_get", "memory_search"})

SUMMARY_INSTRUCTIONS = """\
You condense the earlier part of a chat between a person and their companion, {persona_name}, so the
conversation can go on without the full transcript. Write in the third person, plain prose and
short bullet lists, at most {max_words} words. Keep: what the person told about themselves and
their situation, what they asked for, what {persona_name} said, promised or asked, decisions, feelings,
and anything left open to follow up. Merge the previous summary, if given, with the new turns.
Output only the summary."""

summary_agent: Agent[None, str] = Agent(name="compactor", output_type=str, defer_model_check=True)

Status = Literal["not needed", "cached", "new", "timeout", "failed", "disabled"]


@dataclass(frozen=True)
class Compacted:
    """The history to send, and what compaction did to get it."""

    messages: list[ModelMessage]
    status: Status
    covered_messages: int = 0
    summary_tokens: int = 0
    ms: float = 0.0
    error: str | None = None


def message_digest(message: ModelMessage) -> str:
    """A stable fingerprint of one stored message."""
    return hashlib.sha256(ModelMessagesTypeAdapter.dump_json([message])).hexdigest()


def with_summary(summary: str, tail: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The kept turns with the summary at their head, inside the first request (never alone)."""
    first = tail[0]
    assert isinstance(first, ModelRequest)
    head = dataclasses.replace(first, parts=[CompactionPart(content=summary), *first.parts])
    return [head, *tail[1:]]


def render_for_summary(
    messages: Sequence[ModelMessage], *, persona_name: str, group: bool = False
) -> list[str]:
    """The turns as plain lines, without system parts, turn notes, earlier summaries or recall tool
    traffic (a prompt's files are left out too: only its words). A group turn's prompt already
    names each speaker ("Ana: ..."), so it is given as it is (`group`)."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart) and (said := words(part)):
                lines.append(said if group else f"Person: {said}")
            elif isinstance(part, TextPart) and part.content.strip():
                lines.append(f"{persona_name}: {part.content}")
            elif isinstance(part, BaseToolCallPart) and part.tool_name not in RECALL_TOOLS:
                lines.append(f"({persona_name} used {part.tool_name}: {part.args_as_json_str()})")
            elif isinstance(part, BaseToolReturnPart) and part.tool_name not in RECALL_TOOLS:
                lines.append(f"({part.tool_name} returned: {part.model_response_str()})")
            # System prompts, compaction parts, thinking and bookkeeping parts are left out.
    return lines


class Compactor:
    """Decides, caches and produces history compactions for one process."""

    def __init__(self, settings: Settings, *, model: Model | str | None, counter: TokenCounter) -> None:
        self.settings = settings
        self.model = model
        self.counter = counter
        window = min(settings.model_context_window, settings.history_token_budget)
        self.trigger = int(window * settings.compaction_threshold)
        self.keep = int(window * settings.compaction_keep_ratio)

    async def compact(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        user_id: int,
        conversation_id: int,
        history: Sequence[ModelMessage],
        now: datetime,
        group: bool = False,
    ) -> Compacted:
        """The history to send: unchanged, with a cached summary, or with a fresh one (`group`: the
        conversation is a group chat's, agent/digest/groups.py)."""
        started = time.perf_counter()
        history = list(history)

        def done(
            messages: list[ModelMessage],
            status: Status,
            covered: int = 0,
            summary: str = "",
            error: str | None = None,
        ) -> Compacted:
            ms = (time.perf_counter() - started) * 1000
            return Compacted(messages, status, covered, self.counter.count(summary), round(ms, 2), error)

        if not self.settings.compaction_enabled or self.model is None:
            return done(history, "disabled")
        # A conversation's history only grows, and a summary is written only once it is over the
        # trigger: a history under it has no summary to look for.
        if self.counter.count_messages(history) <= self.trigger:
            return done(history, "not needed")
        async with sessions() as session:
            cached = await self._cached(session, conversation_id, history)
        previous = ""
        covered = 0
        if cached is not None:
            previous, covered = cached.summary, cached.covered_messages
            candidate = with_summary(previous, history[covered:])
            if self.counter.count_messages(candidate) <= self.trigger:
                return done(candidate, "cached", covered, previous)
        boundary = self._boundary(history, covered)
        if boundary is None:
            if cached is not None:  # nothing new to fold in; the cached summary still helps
                return done(with_summary(previous, history[covered:]), "cached", covered, previous)
            return done(history, "not needed")
        try:
            summary = await asyncio.wait_for(
                self._summarise(previous, history[covered:boundary], group=group),
                timeout=self.settings.compaction_timeout_seconds,
            )
        except TimeoutError:
            logger.warning("compaction timed out", extra={"conversation_id": conversation_id})
            return done(history, "timeout", error="TimeoutError")
        except (AgentRunError, UserError, RuntimeError, OSError) as exc:
            # RuntimeError: pydantic-ai refuses model requests when they are disabled (tests).
            logger.warning("compaction failed", extra={"conversation_id": conversation_id}, exc_info=exc)
            return done(history, "failed", error=type(exc).__name__)
        if not summary:
            return done(history, "failed", error="empty summary")
        await self._store(user_id, conversation_id, boundary, history[boundary - 1], summary, now, sessions)
        return done(with_summary(summary, history[boundary:]), "new", boundary, summary)

    def _boundary(self, history: list[ModelMessage], covered: int) -> int | None:
        """The first kept message: the earliest turn start whose tail fits `keep` (newest turn stays)."""
        starts = [s for s in turn_starts(history) if s > covered]
        if not starts:
            return None
        counts = [self.counter.count_message(m) for m in history]
        suffix = 0
        boundary = starts[-1]
        index = len(history)
        for start in reversed(starts):
            suffix += sum(counts[start:index])
            index = start
            if suffix > self.keep:
                break
            boundary = start
        return boundary

    async def _cached(
        self, session: AsyncSession, conversation_id: int, history: list[ModelMessage]
    ) -> HistoryCompaction | None:
        stmt = (
            select(HistoryCompaction)
            .where(HistoryCompaction.conversation_id == conversation_id)
            .order_by(HistoryCompaction.covered_messages.desc())
            .limit(1)
        )
        row = (await session.execute(stmt)).scalar_one_or_none()
        if row is None or not 0 < row.covered_messages < len(history):
            return None
        if message_digest(history[row.covered_messages - 1]) != row.last_message_digest:
            return None
        if row.covered_messages not in turn_starts(history):
            return None
        return row

    async def _summarise(self, previous: str, messages: Sequence[ModelMessage], *, group: bool) -> str:
        lines = render_for_summary(
            sanitize_history(messages), persona_name=self.settings.persona_name, group=group
        )
        # Bound the input: the oldest lines go first (the transcript keeps them, search finds them).
        budget = self.settings.compaction_input_max_tokens
        kept: list[str] = []
        used = self.counter.count(previous)
        for line in reversed(lines):
            used += self.counter.count(line) + 1
            if used > budget:
                break
            kept.append(line)
        prompt = ""
        if previous:
            prompt += f"Previous summary:\n{previous}\n\n"
        prompt += "New turns:\n" + "\n".join(reversed(kept))
        max_tokens = self.settings.compaction_summary_max_tokens
        assert self.model is not None
        static = for_owner(SUMMARY_INSTRUCTIONS, group=group).format(
            max_words=max_tokens * 3 // 4, persona_name=self.settings.persona_name
        )
        result = await summary_agent.run(
            prompt,
            model=self.model,
            instructions=static,
            model_settings=self._model_settings(max_tokens)
            | static_cache_settings(self.settings, self.settings.summary_model, static),
        )
        record_run("compaction", result.usage)
        return truncate_text(result.output.strip(), max_tokens, self.counter)

    def _model_settings(self, max_tokens: int) -> ModelSettings:
        model_settings = ModelSettings(
            max_tokens=max_tokens, timeout=self.settings.compaction_timeout_seconds
        )
        if sampling_allowed(self.settings.summary_model):  # the newest models refuse temperature
            model_settings["temperature"] = self.settings.summary_temperature
        return model_settings

    async def _store(
        self,
        user_id: int,
        conversation_id: int,
        covered: int,
        last: ModelMessage,
        summary: str,
        now: datetime,
        sessions: async_sessionmaker[AsyncSession],
    ) -> None:
        try:
            async with sessions() as session, session.begin():
                if not await user_present(session, user_id):
                    return  # forgotten while the summary was written: cache nothing
                session.add(
                    HistoryCompaction(
                        user_id=user_id,
                        conversation_id=conversation_id,
                        covered_messages=covered,
                        last_message_digest=message_digest(last),
                        summary=summary,
                        summary_tokens=self.counter.count(summary),
                        model=str(getattr(self.model, "model_name", self.model))[:128],
                        created_at=now,
                    )
                )
        except (IntegrityError, SQLAlchemyError) as exc:
            # Not cached this time (a concurrent turn stored the same one, or the conversation went
            # away under /forget): the summary is still used for this turn.
            logger.info(
                "compaction not cached",
                extra={"conversation_id": conversation_id},
                exc_info=exc,
            )
