"""The context builder: collects the context package, compacts the history, fits the budget.

The package (agent/context/package.py) is collected concurrently with the compaction, each
collector under its own timeout, those that read the database taking turns on one DB session (an
`AsyncSession` is not safe to share between tasks at once: agent/context/reads.py). A part that
fails or times out is left out and recorded; the turn goes on. The
package's parts render as tiers; those that are not tiers (the week's summaries, follow-ups) serve
other surfaces (the voice agent's get_context). When the context engine routes the user to v2 or
shadow (agent/context/engine.py), the stored briefing is read beside the collectors and, while its
fingerprint is the package's, serves in place of the tiers (v2) or is recorded beside them (shadow).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import is_group
from agent.context.briefing.reader import BriefingReader
from agent.context.briefing.writer import fingerprint
from agent.context.budget import Budgets, Fitted
from agent.context.compaction import Compacted, Compactor
from agent.context.engine import Variant, assemble_v2, route_for, serve
from agent.context.facts import MessageFacts, limits_for_budget
from agent.context.layers import fit_layers
from agent.context.package import ContextPackage, PackageCollector
from agent.context.profile import profile_entry
from agent.context.reads import COLLECTOR_ERRORS, Collected, SharedReads
from agent.context.tiers import TierBlock, time_block
from agent.core import observability
from agent.core.clock import ensure_utc
from agent.core.errors import ConfigurationError
from agent.core.models import build_model
from agent.core.redaction import describe_error
from agent.core.settings import Settings
from agent.core.tokens import TokenCounter, get_counter
from agent.history.reactions import reaction_notes
from db.models import Conversation, User
from db.repositories.briefings import StoredBriefing

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltContext:
    """The instructions text, the history to send, and the snapshot describing both."""

    text: str
    snapshot: dict[str, Any] = field(default_factory=dict)
    # The instructions after the persona: this conversation's package, the same text on every turn until a
    # source changes (agent/context/layers.py).
    package_text: str = ""
    # This turn's note: the time and the facts found for this message, first in its user prompt.
    note: str = ""
    # None on a conversation's first message: PydanticAI then starts the run fresh.
    history: list[ModelMessage] | None = None
    # The fitted tiers by name (what `text` shows), for surfaces that lay them out their own way.
    blocks: dict[str, TierBlock] = field(default_factory=dict)
    # Everything collected, rendered or not (the voice agent's get_context reads it whole).
    package: ContextPackage | None = None
    # Which engine served (agent/context/engine.py), and the briefing when v2 did.
    engine: str = "v1"
    briefing: StoredBriefing | None = None


def _size(value: object) -> int:
    """How many items a collected value holds (a tuple of thoughts or days)."""
    return len(value) if isinstance(value, tuple) else 0


def _default_summary_model(settings: Settings) -> Model | str | None:
    """The summary model from settings, or None (compaction off) when it cannot be built."""
    if settings.summary_model.startswith("anthropic:") and settings.anthropic_api_key is None:
        return None
    try:
        return build_model(settings.summary_model, settings)
    except (ConfigurationError, UserError, ValueError, ImportError) as exc:
        logger.warning("summary model unavailable, compaction off", exc_info=exc)
        return None


class ContextBuilder:
    """Builds each turn's context: the tiers, the compacted history, fitted to the budgets."""

    def __init__(
        self,
        settings: Settings,
        *,
        facts: MessageFacts | None = None,
        summary_model: Model | str | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.settings = settings
        self.facts = facts
        self.counter = counter or get_counter()
        self.budgets = Budgets.from_settings(settings)
        self.collector = PackageCollector(
            settings,
            facts=self.facts,
            counter=self.counter,
            today_budget=self.budgets.tiers["today"],
            profile_budget=self.budgets.tiers["profile"],
        )
        # The profiles the collector chose, per owner (/forget drops theirs).
        self.profiles = self.collector.profiles
        model = summary_model if summary_model is not None else _default_summary_model(settings)
        self.compactor = Compactor(settings, model=model, counter=self.counter)
        self.briefings = BriefingReader()

    @observability.traced_context
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
        variant: Variant = "text",
    ) -> BuiltContext:
        """Assemble the context for this message; never raises for a tier's failure.

        `conversation` is None outside a conversation (a voice call starting): "last conversation" is
        then the newest one, and there is no history to compact. `variant` picks the briefing's
        text or voice variant when v2 serves.
        """
        started = time.perf_counter()
        route = route_for(self.settings, user.id)
        # What history will take at most, counted from the newest message: the rest picks the facts' limits.
        estimate = 0
        for message in reversed(history):
            estimate += self.counter.count_message(message)
            if estimate >= self.budgets.history:
                estimate = self.budgets.history
                break
        remaining = self.budgets.hard_cap - estimate
        conversation_id = conversation.id if conversation is not None else None
        # The conversation's package is read as of the conversation's start, so its wording stays put
        # turn to turn.
        anchor = ensure_utc(conversation.started_at) if conversation is not None else now
        reading = self.briefings.start(sessions, user.id) if route != "v1" else None
        # The reactions since their last message belong to this turn's note; read beside the rest,
        # on the collectors' session.
        reads = SharedReads(sessions)
        try:
            package, compacted, noticed = await asyncio.gather(
                self.collector.collect(
                    sessions,
                    user=user,
                    conversation_id=conversation_id,
                    text=text,
                    now=now,
                    anchor=anchor,
                    previous_message_at=previous_message_at,
                    remaining=remaining,
                    reads=reads,
                ),
                self._compact(sessions, user.id, conversation_id, history, now, group=is_group(user)),
                self._reactions(reads, user.id, now, previous_message_at),
            )
        finally:
            await reads.close()
        with observability.tier_span("time"):
            now_block = time_block(user, now, previous_message_at)
            if noticed:
                now_block = now_block.with_items((*now_block.items, *noticed))
        fixed = [package.profile] if package.profile is not None else []
        loaded = package.blocks()
        found = loaded.pop("memory", None)
        turn = [now_block, *([found] if found is not None else [])]
        assembling = time.perf_counter()
        stored: Collected[StoredBriefing] | None = None
        stamp = ""
        if route != "v1":
            stamp = fingerprint(package)
            stored = await self.briefings.finish(sessions, user.id, stamp, reading)
        served = serve(
            route,
            self.settings.context_engine,
            stored,
            v1=lambda: fit_layers(
                fixed, loaded, turn, compacted.messages, budgets=self.budgets, counter=self.counter
            ),
            v2=lambda briefing: assemble_v2(
                briefing,
                package,
                time=now_block,
                history=compacted.messages,
                variant=variant,
                budgets=self.budgets,
                counter=self.counter,
            ),
            stamp=stamp,
        )
        layered, engine = served.fitted, served.entry
        fitted = layered.fitted
        # The engine's own work after collection: fitting (v1), reading the briefing and assembling
        # (v2), both (shadow).
        engine["ms"] = round((time.perf_counter() - assembling) * 1000, 3)
        build_ms = (time.perf_counter() - started) * 1000
        snapshot = self._snapshot(package, loaded, compacted, fitted, len(history), remaining, build_ms)
        snapshot["engine"] = engine
        snapshot["layers"] = {
            "memory_tokens": self.counter.count(layered.package_text),
            "note_tokens": self.counter.count(layered.note),
            "window_start": layered.window.start,
            "window_cuts": layered.window.cuts,
        }
        logger.debug(
            "context built",
            extra={
                "user_id": user.id,
                "conversation_id": conversation_id,
                "tokens": fitted.total_tokens,
                "build_ms": round(build_ms, 2),
            },
        )
        return BuiltContext(
            text=fitted.text,
            snapshot=snapshot,
            package_text=layered.package_text,
            note=layered.note,
            history=fitted.history or None,
            blocks=dict(fitted.blocks),
            package=package,
            engine=engine["served"],
            briefing=served.briefing,
        )

    async def _reactions(
        self, reads: SharedReads, user_id: int, now: datetime, previous_message_at: datetime | None
    ) -> list[str]:
        # What happened since their last message belongs with the time; a failure only leaves it out.
        try:
            return await reads.run(lambda session: reaction_notes(session, user_id, now, previous_message_at))
        except COLLECTOR_ERRORS as exc:
            logger.warning("reactions unavailable", exc_info=exc)
            return []

    async def _compact(
        self,
        sessions: async_sessionmaker[AsyncSession],
        user_id: int,
        conversation_id: int | None,
        history: Sequence[ModelMessage],
        now: datetime,
        *,
        group: bool,
    ) -> Compacted:
        if not history or conversation_id is None:
            return Compacted([], "not needed")
        with observability.span("context compaction") as traced:
            try:
                compacted = await self.compactor.compact(
                    sessions,
                    user_id=user_id,
                    conversation_id=conversation_id,
                    history=history,
                    now=now,
                    group=group,
                )
            except COLLECTOR_ERRORS as exc:
                # The cache could not be read or written: plain truncation, as on a summary failure.
                logger.warning("compaction unavailable", exc_info=exc)
                compacted = Compacted(list(history), "failed", error=describe_error(exc)[:300])
            if traced.is_recording():
                traced.set_attributes(
                    {
                        "nikita.compaction.status": compacted.status,
                        "nikita.compaction.covered_messages": compacted.covered_messages,
                        "nikita.compaction.summary_tokens": compacted.summary_tokens,
                    }
                )
            return compacted

    def _snapshot(
        self,
        package: ContextPackage,
        loaded: Mapping[str, TierBlock],
        compacted: Compacted,
        fitted: Fitted,
        stored_count: int,
        remaining: int,
        build_ms: float,
    ) -> dict[str, Any]:
        tiers: dict[str, dict[str, Any]] = {}
        for name in ("briefing", "time", "profile"):
            if name == "briefing" and name not in fitted.blocks:
                continue
            tiers[name] = {
                "present": name in fitted.blocks,
                "count": len(fitted.blocks[name].items) if name in fitted.blocks else 0,
                "tokens": fitted.block_tokens.get(name, 0),
                "status": "ok",
            }
        chosen = package.profile_facts
        tiers["profile"] |= {"status": chosen.status, "ms": chosen.ms}
        if chosen.value is not None:
            tiers["profile"] |= profile_entry(chosen.value.profile)
        if chosen.error:
            tiers["profile"]["error"] = chosen.error
        parts = package.parts()
        for name, part in parts.items():
            block = fitted.blocks.get(name)
            source = loaded.get(name)
            entry: dict[str, Any] = {
                "present": block is not None,
                "count": len(block.items) if block is not None else 0,
                "loaded": len(source.items) if source is not None else _size(part.value),
                "tokens": fitted.block_tokens.get(name, 0),
                "status": part.status,
                "ms": part.ms,
            }
            if part.error:
                entry["error"] = part.error
            tiers[name] = entry
        if self.facts is not None:
            tiers["memory"]["limits"] = limits_for_budget(remaining).name
        failures = [
            {"tier": name, "status": part.status, "error": part.error}
            for name, part in {"profile": chosen, **parts}.items()
            if part.error
        ]
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
