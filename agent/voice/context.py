"""What a voice call starts with and what `get_context` answers: the text turn's context, for speech.

The context builder of text turns (agent/context) assembles the tiers under the same budgets, or,
when the context engine serves v2, the briefing's voice variant with the live parts; a call adds its
own persona, the recent messages of a text conversation it interrupts, the dynamic
variables the voice agent's prompt template may use, and what the bot knows about the person with
the standard limits: the one list of facts (the profile as the prompt reads it, then the rest the
person has not hidden; 50 at most) and, with a graph on, its shared episodes (30) and the persona's
events (20), its facts about the person joining the list only where they add to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic_ai.messages import CompactionPart, ModelMessage
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.chat.persona import Persona
from agent.context import BuiltContext, ContextBuilder, describe_gap, part_of_day
from agent.context.compaction import render_for_summary
from agent.context.package import ContextPackage
from agent.core.clock import ensure_utc
from agent.core.errors import GraphOpeningError
from agent.graph import STANDARD_LIMITS, EdgeFact, GraphError
from agent.history.cache import ConversationHistories
from agent.memory.listing import listing_of
from agent.memory.service import Facts
from agent.turn.conversations import conversation_expired
from db.models import Conversation, User
from db.repositories.conversations import ConversationRepository

logger = logging.getLogger(__name__)

RECENT_HEADING = "## Just before this call, by text"


def render_recent(messages: Sequence[ModelMessage], *, persona_name: str) -> list[str]:
    """A text conversation's fitted history as lines for the call's prompt (a compaction summary first)."""
    summaries = [
        f"(Earlier in that chat: {part.content})"
        for message in messages
        for part in message.parts
        if isinstance(part, CompactionPart) and isinstance(part.content, str)
    ]
    return [*summaries, *render_for_summary(messages, persona_name=persona_name)]


def local_time(user: User, now: datetime) -> str:
    """ "Tuesday evening, 19:30 (Europe/Lisbon)": the user's local time as the voice agent says it."""
    local = now.astimezone(ZoneInfo(user.timezone))
    return f"{local:%A} {part_of_day(local.hour)}, {local:%H:%M} ({user.timezone})"


def since_last_contact(user: User, now: datetime) -> str:
    """How long since the user last wrote or called, in words."""
    if user.last_message_at is None:
        return "never (first contact)"
    return describe_gap((now - ensure_utc(user.last_message_at)).total_seconds())


def _items(built: BuiltContext, tier: str) -> list[str]:
    # The package's block when v2 served (its instructions show the briefing, not the tiers).
    block = built.blocks.get(tier)
    if block is None and built.engine == "v2" and built.package is not None:
        block = built.package.blocks().get(tier)
    return list(block.items) if block is not None else []


@dataclass(frozen=True)
class CallContext:
    """A call's system prompt, its dynamic variables and the context it was built from."""

    prompt: str
    dynamic_variables: dict[str, str]
    built: BuiltContext


class VoiceContext:
    """Builds a call's context and the `get_context` package for one user at a time."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        builder: ContextBuilder,
        histories: ConversationHistories,
        facts: Facts,
        conversation_timeout: timedelta,
        persona: Persona,
    ) -> None:
        self.persona = persona
        self.sessions = sessions
        self.builder = builder
        self.histories = histories
        # The one list of facts, and the graph's enrichment of it when a graph is on.
        self.facts = facts
        self.conversation_timeout = conversation_timeout

    async def _active(self, user_id: int, now: datetime) -> Conversation | None:
        async with self.sessions() as session:
            conversation = await ConversationRepository(session).active_for(user_id)
        if conversation is None or conversation_expired(
            conversation.last_message_at, now, self.conversation_timeout
        ):
            return None
        return conversation

    async def build(self, user: User, now: datetime) -> CallContext:
        """The call's prompt: the voice persona, the tiers as a text turn sees them, recent text messages."""
        active = await self._active(user.id, now)
        history: list[ModelMessage] = []
        if active is not None:
            history = (await self.histories.load(self.sessions, active.id, active.message_count)).messages
        built = await self.builder.build(
            self.sessions,
            user=user,
            conversation=active,
            text="",
            now=now,
            previous_message_at=user.last_message_at,
            history=history,
            variant="voice",
        )
        parts = [self.persona.voice, built.text]
        if recent := render_recent(built.history or [], persona_name=self.persona.name):
            parts.append("\n".join([RECENT_HEADING, *recent]))
        variables = {
            "persona_name": self.persona.name,
            "user_name": user.name or "",
            "local_time": local_time(user, now),
            "time_since_last_contact": since_last_contact(user, now),
            "today_summary": "\n".join(_items(built, "today")),
            "open_threads": "\n".join(_items(built, "threads")),
        }
        return CallContext("\n\n".join(p for p in parts if p), variables, built)

    async def package(self, user: User, now: datetime) -> dict[str, Any]:
        """`get_context`: profile, time, every tier, the persona's active thoughts, the week's day
        summaries, and the three graph groups with the standard limits."""
        call, (graph_facts, graph_error) = await asyncio.gather(
            self.build(user, now), self.graph_groups(user, now)
        )
        built = call.built
        failures = list(built.snapshot.get("failures", []))
        if graph_error is not None:
            failures.append({"tier": "graph", "status": "failed", "error": graph_error})
        return {
            "user": {"name": user.name, "timezone": user.timezone, "profile": user.profile or {}},
            "local_time": call.dynamic_variables["local_time"],
            "time_since_last_contact": call.dynamic_variables["time_since_last_contact"],
            "today": _items(built, "today"),
            "yesterday": _items(built, "yesterday"),
            "open_threads": _items(built, "threads"),
            "last_conversation": _items(built, "last_conversation"),
            "active_thoughts": _thoughts(built.package),
            "week": _week(built.package),
            "recent_text_messages": render_recent(built.history or [], persona_name=self.persona.name),
            "memory": graph_facts,
            "engine": built.engine,
            # The briefing's voice variant when v2 served the call (what its prompt was built from).
            "briefing": built.briefing.voice if built.briefing is not None else None,
            "failures": failures,
        }

    async def graph_groups(self, user: User, now: datetime) -> tuple[dict[str, Any], str | None]:
        """What the bot knows about the person: the list's facts, the profile's first (hidden ones
        and past plans left out), and, with a graph on, its shared-history and persona facts."""
        limits = STANDARD_LIMITS
        listing = await listing_of(
            self.sessions, user.id, user.timezone, now=now, settings=self.facts.settings
        )
        current = [f for f in listing.facts if f.standing in ("profile", "recalled")][: limits.user]
        groups: dict[str, Any] = {
            "user_facts": [
                {"text": f.content, "since": f.day.isoformat(), "in_profile": f.standing == "profile"}
                for f in current
            ],
            "relationship_episodes": [],
            "persona_events": [],
            "limits": {"user": limits.user, "relationship": limits.relationship, "persona": limits.persona},
        }
        graph = self.facts.graph
        if graph is None:
            return groups, None
        try:
            found = await graph.search(user.id, "", limits=limits, now=now)
        except GraphOpeningError:
            return groups, None  # the first seconds after a start: the list answers alone
        except GraphError as exc:
            # A memory failure degrades the context, never the call: the list answers alone.
            logger.warning("voice graph context failed", extra={"user_id": user.id, "error": repr(exc)})
            return groups, f"{type(exc).__name__}: {exc}"[:300]
        # The user group is a view of the list, which `user_facts` already shows.
        groups["relationship_episodes"] = [_fact(f) for f in found.relationship]
        groups["persona_events"] = [_fact(f) for f in found.persona]
        return groups, None


def _thoughts(package: ContextPackage | None) -> list[dict[str, str]]:
    """The persona's active thoughts, newest first, with the day each came."""
    thoughts = package.thoughts.value if package is not None else None
    return [{"thought": t.content, "since": t.created_at.date().isoformat()} for t in thoughts or ()]


def _week(package: ContextPackage | None) -> list[dict[str, str]]:
    """The week's day summaries, newest day first."""
    days = package.week.value if package is not None else None
    return [{"day": d.day.isoformat(), "weekday": f"{d.day:%A}", "summary": d.summary} for d in days or ()]


def _fact(fact: EdgeFact) -> dict[str, Any]:
    """A graph fact beside the list's (never in the profile)."""
    since = fact.valid_at.date().isoformat() if fact.valid_at else ""
    return {"text": fact.text, "since": since, "in_profile": False}
