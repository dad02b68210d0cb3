"""The timeline's "What I remember": the listing /memory shows (agent/memory/listing.py), each fact
with its sources (agent/memory/provenance.py), and the person's changes to one fact: forget, pin or
unpin, hide or show ("don't bring this up"), reword.

Every call signs in like the rest of the timeline's API (bot/web/timeline/api.py) and acts on the
signed-in person's facts alone: another person's fact id answers 404, like a missing one. Each change
answers with the listing as it now stands, since pinning or hiding one fact can move others in or
out of the profile.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request

from agent.core.errors import FactRejectedError
from agent.memory.listing import Flag, Listed, Listing, listing_of, reword, set_flag
from agent.memory.provenance import sources_dict
from bot.errors import ApiError, JsonInputError
from bot.runtime import Runtime
from bot.web import json_input
from bot.web.timeline.api import Handler, SignedIn, path_id

logger = logging.getLogger(__name__)

REASON = "they deleted it in the timeline"
# A rewording's body: its words and a little JSON around them.
_BODY_BYTES = 16_384


def fact_payload(fact: Listed) -> dict[str, Any]:
    """One fact as the page reads it, with where it comes from (the person's lines, or how else it came)."""
    return {
        "id": fact.id,
        "content": fact.content,
        "day": fact.day.isoformat(),
        "source": fact.source,
        "section": fact.section,
        "pinned": fact.pinned,
        "hidden": fact.hidden,
        "standing": fact.standing,
        "sources": sources_dict(fact.sources),
    }


def listing_payload(listing: Listing, *, max_chars: int) -> dict[str, Any]:
    """The listing as the page reads it: the profile, the rest, and what a rewording may hold."""
    return {
        "profile": [fact_payload(f) for f in listing.profile],
        "rest": [fact_payload(f) for f in listing.rest],
        "more": listing.more,
        "tokens": listing.tokens,
        "budget": listing.budget,
        "max_chars": max_chars,
    }


async def _body(request: Request, *, max_chars: int) -> dict[str, Any]:
    """A rewording's JSON object; 400, saying what to send, when it is anything else."""
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > _BODY_BYTES:
            raise ApiError(400, f"a fact holds at most {max_chars} characters")
        chunks.append(chunk)
    try:
        body = json_input.loads(b"".join(chunks))
    except JsonInputError as exc:
        raise ApiError(400, 'send the new wording as JSON: {"content": "..."}') from exc
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        raise ApiError(400, 'send the new wording as JSON: {"content": "..."}')
    return body


class FactsApi:
    """The handlers of /timeline/api/facts; built once per web app, beside `TimelineApi`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def _max_chars(self) -> int:
        return self.runtime.settings.memory_fact_max_chars

    async def _listing(self, who: SignedIn) -> dict[str, Any]:
        user = who.user
        if user is None:
            return listing_payload(Listing((), (), 0, 0, 0), max_chars=self._max_chars)
        listing = await listing_of(
            self.runtime.sessions,
            user.id,
            user.timezone,
            now=self.runtime.clock.now(),
            settings=self.runtime.settings,
        )
        return listing_payload(listing, max_chars=self._max_chars)

    def _changed(self, who: SignedIn, what: str) -> None:
        assert who.user is not None
        if self.runtime.facts is not None:
            self.runtime.facts.changed(who.user.id)
        logger.info("fact changed in the timeline", extra={"user_id": who.user.id, "action": what})

    async def facts(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/facts: the profile as the bot reads it, then the rest."""
        return await self._listing(who)

    async def forget(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/facts/{fact_id}/forget: take back one fact (and the graph's edges)."""
        fact_id = path_id(request.path_params["fact_id"])
        facts, gone = self.runtime.facts, None
        if who.user is not None and facts is not None:
            gone = await facts.forget_fact(who.user.id, fact_id, reason=REASON, at=self.runtime.clock.now())
        if gone is None:
            raise ApiError(404, "not found")
        logger.info(
            "fact changed in the timeline",
            extra={"user_id": who.user.id if who.user else None, "action": "forget"},
        )
        return {"forgotten": gone, **await self._listing(who)}

    def flag(self, flag: Flag) -> Handler:
        """POST /timeline/api/facts/{fact_id}/<flag>: pin or unpin, hide or show one fact."""

        async def change(request: Request, who: SignedIn) -> dict[str, Any]:
            fact_id = path_id(request.path_params["fact_id"])
            fact = None
            if who.user is not None:
                at = self.runtime.clock.now()
                fact = await set_flag(self.runtime.sessions, who.user.id, fact_id, flag, at=at)
            if fact is None:
                raise ApiError(404, "not found")
            self._changed(who, flag)
            return {"fact_id": fact.id, **await self._listing(who)}

        return change

    async def reword(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/facts/{fact_id}/reword {"content": ...}: the fact in the person's words."""
        fact_id = path_id(request.path_params["fact_id"])
        body = await _body(request, max_chars=self._max_chars)
        fact = None
        if who.user is not None:
            try:
                fact = await reword(
                    self.runtime.sessions,
                    who.user.id,
                    fact_id,
                    body["content"],
                    at=self.runtime.clock.now(),
                    max_chars=self._max_chars,
                )
            except FactRejectedError as exc:
                raise ApiError(400, str(exc)) from exc
        if fact is None:
            raise ApiError(404, "not found")
        self._changed(who, "reword")
        return {"fact_id": fact.id, **await self._listing(who)}
