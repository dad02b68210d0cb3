"""The voice agent's server tools, for the call token's user only.

`get_context` is the context package, `get_memory(query, limit)` searches the memory (saved and
graph facts, past conversations) and lists the open threads, `update_memory(fact, category)` saves a
durable fact under `memory_add`'s policy. The user is the token's, never an argument, so no
request can reach another user's data. Arguments are checked here; what the agent can fix comes back
as a `VoiceRequestError` (a structured 400), a memory source that fails is left out with a note.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.chat.tools import hit_dict
from agent.context.tiers import load_threads
from agent.core.errors import FactRejectedError, NikitaError, VoiceRequestError
from agent.memory.facts import clean_fact
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.voice.context import VoiceContext
from agent.voice.store import VoiceStore
from db.models import User

logger = logging.getLogger(__name__)

FactCategory = Literal["personal", "preference", "work", "family", "relationship", "plans", "other"]
# A source that fails is left out of get_memory's answer, never allowed to fail the call.
SOURCE_ERRORS = (SQLAlchemyError, OSError, TimeoutError, NikitaError)


class _Args(BaseModel):
    # The voice platform may send bookkeeping fields of its own next to the tool's parameters.
    model_config = ConfigDict(extra="ignore")


class GetContextArgs(_Args):
    """get_context takes no arguments."""


class GetMemoryArgs(_Args):
    """What to look for and how many results of each kind."""

    query: str = ""
    limit: int = Field(default=8, ge=1, le=20)


class UpdateMemoryArgs(_Args):
    """One durable fact and what it is about."""

    fact: str
    category: FactCategory = "other"


def _validate[A: _Args](model: type[A], arguments: Mapping[str, object]) -> A:
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise VoiceRequestError("invalid_arguments", problems) from exc


class VoiceTools:
    """Runs one server tool for one user."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        context: VoiceContext,
        recall: Recall,
        facts: Facts,
        store: VoiceStore,
        threads_limit: int,
    ) -> None:
        self.sessions = sessions
        self.context = context
        self.recall = recall
        self.facts = facts
        self.store = store
        self.threads_limit = threads_limit
        self._tools: dict[
            str, Callable[[User, Mapping[str, object], datetime], Awaitable[dict[str, Any]]]
        ] = {
            "get_context": self.get_context,
            "get_memory": self.get_memory,
            "update_memory": self.update_memory,
        }

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names."""
        return tuple(self._tools)

    async def run(
        self, name: str, user: User, arguments: Mapping[str, object], now: datetime
    ) -> dict[str, Any]:
        """Run a tool by name; unknown names and bad arguments raise `VoiceRequestError`."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools)
            raise VoiceRequestError("unknown_tool", f"no tool named {name!r}; the tools are {known}")
        return await tool(user, arguments, now)

    async def get_context(self, user: User, arguments: Mapping[str, object], now: datetime) -> dict[str, Any]:
        """Everything known right now: profile, time, the tiers, the three graph groups."""
        _validate(GetContextArgs, arguments)
        return await self.context.package(user, now)

    async def get_memory(self, user: User, arguments: Mapping[str, object], now: datetime) -> dict[str, Any]:
        """Facts and past conversations matching the query, and the open threads."""
        args = _validate(GetMemoryArgs, arguments)
        notes: list[str] = []
        facts: list[dict[str, Any]] = []
        conversations: list[dict[str, Any]] = []
        threads: list[str] = []
        try:
            hits = await self.facts.search(user.id, args.query, limit=args.limit, now=now)
            facts = [{"fact": h.content, "since": h.created_at[:10]} for h in hits]
        except SOURCE_ERRORS as exc:
            notes.append(self._failed("facts", user.id, exc))
        if args.query.strip():
            try:
                found = await self.recall.search(user.id, args.query, now=now, limit=args.limit, before=now)
                conversations = [hit_dict(h) for h in found]
            except SOURCE_ERRORS as exc:
                notes.append(self._failed("conversations", user.id, exc))
        try:
            async with self.sessions() as session:
                block = await load_threads(session, user, now, limit=self.threads_limit)
            threads = [line.removeprefix("- ") for line in block.items] if block is not None else []
        except SOURCE_ERRORS as exc:
            notes.append(self._failed("threads", user.id, exc))
        answer: dict[str, Any] = {"facts": facts, "conversations": conversations, "threads": threads}
        if notes:
            answer["note"] = "; ".join(notes)
        elif not facts and not conversations:
            answer["note"] = "nothing found for that; try other words, or say you don't remember"
        return answer

    async def update_memory(
        self, user: User, arguments: Mapping[str, object], now: datetime
    ) -> dict[str, Any]:
        """Save one durable fact (deduplicated) to the user's memory."""
        args = _validate(UpdateMemoryArgs, arguments)
        try:
            text = clean_fact(args.fact, max_chars=self.recall.settings.memory_fact_max_chars)
        except FactRejectedError as exc:
            raise VoiceRequestError("invalid_arguments", str(exc)) from exc
        added = await self.store.add_fact(user.id, text, args.category, now)
        if added is None:
            return {"stored": False, "fact": text, "category": args.category, "note": "memory is closed"}
        return {
            "stored": True,
            "fact": added.content,
            "category": args.category,
            "already_known": not added.created,
        }

    def _failed(self, source: str, user_id: int, exc: BaseException) -> str:
        logger.warning(
            "voice memory source failed", extra={"source": source, "user_id": user_id, "error": repr(exc)}
        )
        return f"{source} are unavailable right now"
