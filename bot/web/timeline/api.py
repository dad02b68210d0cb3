"""The timeline's JSON API: every call signs in with Telegram's initData and reads only that user.

The user id never comes from the request: it is the stored user behind the Telegram id that the
signed initData names, so another user's ids look exactly like missing ones (404). Search and
"open" are `Recall.search` / `Recall.get`, the very calls behind the agent's tools.

A read takes a sign-in up to TIMELINE_AUTH_MAX_AGE_SECONDS old, a change (every POST) one up to
TIMELINE_WRITE_MAX_AGE_SECONDS. A person the access rules refuse (/deny, or not on the allowlist)
gets 403 on every call, as the chat refuses them. Search and "Regenerate summary" count against the
person's own message limits (RATE_LIMIT_PER_MINUTE / _PER_DAY, the chat's), and regenerate against
its own too: past either, 429.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from starlette.requests import Request
from starlette.responses import JSONResponse

from agent.account.access import AccessPolicy
from agent.account.group_forget import forget_group_words, group_lines_of
from agent.account.ratelimit import RateLimiter, Scope
from agent.account.timeline import DayView, Entry, Timeline, TimelineUser, parse_summary, within_calendar
from agent.chat.tools import hit_dict
from agent.core.errors import RecallNotFoundError
from agent.search.get import MessagesOut, SummaryOut
from agent.search.recall import Recall
from bot.errors import ApiError, IdFormatError, InitDataError
from bot.runtime import Runtime
from bot.web.auth import SCHEME, sign_in
from bot.web.ids import parse_id

logger = logging.getLogger(__name__)

# Results per search on the page (the tools' own cap, SEARCH_MAX_LIMIT, still applies).
SEARCH_RESULTS = 10
_NO_STORE = {"Cache-Control": "no-store"}
DENIED = "You can't use this bot, so its timeline is closed to you."
_SLOW_DOWN = {
    "minute": "That's a lot of requests at once; try again in a minute.",
    "day": "That's a lot of requests for one day; try again tomorrow.",
}
# ASCII digits only: `date.fromisoformat` also takes "20260302" and week dates.
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class SignedIn:
    """Who sent the request: the Telegram id the signed initData names, and their stored user."""

    telegram_id: int
    user: TimelineUser | None


Handler = Callable[[Request, SignedIn], Awaitable[dict[str, Any]]]


def _json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(payload, status_code=status, headers=_NO_STORE)


def _day(text: str) -> date:
    """A day from a request: 400 when it is no YYYY-MM-DD date, 404 when no user can have it."""
    try:
        if not _DAY.fullmatch(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError as exc:
        raise ApiError(400, "a day is written YYYY-MM-DD") from exc
    if not within_calendar(day):
        raise ApiError(404, "no messages that day")
    return day


def path_id(text: str) -> int:
    """A database id from a path: 400 when it is not ASCII digits, 404 when nothing can have it."""
    try:
        value = parse_id(text)
    except IdFormatError as exc:
        raise ApiError(400, "an id is written in digits 0-9") from exc
    if value is None or value < 1:
        raise ApiError(404, "not found")
    return value


def _local_time(at: datetime, timezone: str) -> str:
    return at.astimezone(ZoneInfo(timezone)).strftime("%H:%M")


def _entry(entry: Entry, timezone: str) -> dict[str, Any]:
    return {
        "id": entry.id,
        "type": entry.type,
        "role": entry.role,
        "kind": entry.kind,
        "content": entry.content,
        "time": _local_time(entry.at, timezone),
        "at": entry.at.isoformat(timespec="seconds"),
        "covered": entry.covered,
        "reactions": list(entry.reactions),
        **({"speaker": entry.speaker} if entry.speaker else {}),
    }


def day_payload(view: DayView) -> dict[str, Any]:
    """The JSON of one day: summary card and folded timeline."""
    card = None
    if view.card is not None:
        card = asdict(view.card)
        updated = view.card.updated_at
        card["updated_at"] = updated.isoformat(timespec="seconds") if updated else None
        card["updated_time"] = _local_time(updated, view.timezone) if updated else None
    return {
        "day": view.day.isoformat(),
        "timezone": view.timezone,
        "card": card,
        "blocks": [
            {"type": b.type, "entries": [_entry(e, view.timezone) for e in b.entries]} for b in view.blocks
        ],
        "truncated": view.truncated,
    }


class TimelineApi:
    """The handlers; built once per web app."""

    def __init__(self, runtime: Runtime, *, bot_token: str) -> None:
        settings = runtime.settings
        self.runtime = runtime
        self.timeline = Timeline(runtime.sessions)
        self.bot_token = bot_token
        self.max_age = timedelta(seconds=settings.timeline_auth_max_age_seconds)
        self.write_max_age = timedelta(seconds=settings.timeline_write_max_age_seconds)
        # The bot's own limits (agent/account/ratelimit.py): counted in the database, across instances and
        # restarts, keyed like every other limit by the Telegram identity.
        self.limits = RateLimiter.from_settings(runtime.sessions, settings)
        # The chat's access rules, read from the database (a /deny holds here within seconds).
        self.access = AccessPolicy.from_settings(runtime.sessions, settings, runtime.clock)

    # --- sign-in ------------------------------------------------------------------------------

    async def _signed_in(self, request: Request) -> SignedIn:
        """The sender of a request with valid initData (401 otherwise) whom the access rules let in
        (403 otherwise); a change needs a fresher sign-in than a read."""
        max_age = self.max_age if request.method in ("GET", "HEAD") else self.write_max_age
        try:
            signed = sign_in(request, bot_token=self.bot_token, now=self.runtime.clock.now(), max_age=max_age)
        except InitDataError as exc:
            logger.warning("timeline sign-in refused", extra={"reason": str(exc), "path": request.url.path})
            raise ApiError(401, str(exc)) from exc
        if not await self.access.allows(signed.user.id, signed.user.username):
            logger.info("timeline refused by the access rules", extra={"path": request.url.path})
            raise ApiError(403, DENIED)
        return SignedIn(signed.user.id, await self.timeline.user_for_telegram(signed.user.id))

    async def limited(self, who: SignedIn, *scopes: Scope) -> None:
        """Count the request against the person's limits; 429 past any of them."""
        now = self.runtime.clock.now()
        for scope in scopes:
            verdict = await self.limits.check(f"telegram:{who.telegram_id}", now, scope)
            if not verdict.allowed:
                message = _SLOW_DOWN[verdict.window or "day"] if scope == "message" else verdict.message
                raise ApiError(429, message)

    def _recall(self) -> Recall:
        if self.runtime.recall is None:
            raise ApiError(503, "search is not available right now")
        return self.runtime.recall

    def endpoint(self, handler: Handler) -> Callable[[Request], Awaitable[JSONResponse]]:
        """A Starlette endpoint: sign-in first (every call), then the handler's JSON or its ApiError."""

        async def respond(request: Request) -> JSONResponse:
            try:
                return _json(await handler(request, await self._signed_in(request)))
            except ApiError as exc:
                extra = {"WWW-Authenticate": SCHEME} if exc.status == 401 else {}
                return JSONResponse(
                    {"error": exc.message}, status_code=exc.status, headers={**_NO_STORE, **extra}
                )

        return respond

    # --- endpoints ----------------------------------------------------------------------------

    async def days(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/days: who, today and yesterday in their time zone, the days with messages."""
        user = who.user
        timezone = user.timezone if user else self.runtime.settings.default_timezone
        today = self.runtime.clock.now().astimezone(ZoneInfo(timezone)).date()
        marks = await self.timeline.calendar(user) if user else []
        return {
            "user": {"name": user.name, "timezone": user.timezone} if user else None,
            "today": today.isoformat(),
            "yesterday": (today - timedelta(days=1)).isoformat(),
            "days": [
                {
                    "day": m.day.isoformat(),
                    "messages": m.messages,
                    "summarised": m.summarised,
                    "final": m.final,
                }
                for m in marks
            ],
        }

    async def day(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/days/{day}: the summary card and the folded timeline of one day."""
        day = _day(request.path_params["day"])
        user = who.user
        if user is None:  # nothing stored yet (or forgotten): an empty day
            return day_payload(DayView(day, self.runtime.settings.default_timezone, None, [], False))
        return day_payload(await self.timeline.day(user, day))

    async def regenerate(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/days/{day}/regenerate: queue the day-summaries job to rewrite it."""
        day = _day(request.path_params["day"])
        user = who.user
        if user is None:
            raise ApiError(404, "no messages that day")
        await self.limited(who, "message", "regenerate")
        now = self.runtime.clock.now()
        outcome = await self.timeline.request_regeneration(user, day, now)
        if outcome == "no_messages":
            raise ApiError(404, "no messages that day")
        logger.info("summary rewrite requested", extra={"user_id": user.id, "outcome": outcome})
        return {"status": outcome}

    async def search(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/search?q=&scope=day|all&day=: conversation_search for the signed-in user."""
        query = request.query_params.get("q", "").strip()
        scope = request.query_params.get("scope", "all")
        if scope not in ("day", "all"):
            raise ApiError(400, "scope is day or all")
        day = _day(request.query_params.get("day", "")) if scope == "day" else None
        if not query:
            raise ApiError(400, "type something to search for")
        user = who.user
        if user is None:
            return {"query": query, "scope": scope, "results": []}
        await self.limited(who, "message")  # each search embeds the query and catches the index up
        hits = await self._recall().search(
            user.id, query, now=self.runtime.clock.now(), day=day, limit=SEARCH_RESULTS
        )
        return {"query": query, "scope": scope, "results": [hit_dict(h) for h in hits]}

    async def _conversation_get(self, who: SignedIn, **ids: int) -> MessagesOut | SummaryOut:
        """Recall.get for the signed-in user; anything not theirs is 404, like anything missing."""
        try:
            if who.user is None:
                raise RecallNotFoundError("nothing stored for this person")
            return await self._recall().get(who.user.id, **ids)
        except RecallNotFoundError as exc:
            raise ApiError(404, "not found") from exc

    async def message(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/messages/{id}: conversation_get(message_id), the exact message."""
        out = await self._conversation_get(who, message_id=path_id(request.path_params["message_id"]))
        assert isinstance(out, MessagesOut)
        return {"messages": [m.shown() for m in out.messages]}

    async def summary(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/summaries/{id}: conversation_get(day_segment_id), a day's summary."""
        out = await self._conversation_get(who, day_segment_id=path_id(request.path_params["day_segment_id"]))
        assert isinstance(out, SummaryOut)
        return {**asdict(out), "sections": [asdict(s) for s in parse_summary(out.summary_markdown)]}

    async def group_lines(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/group-lines: how many lines they said in groups still hold their text."""
        return {"lines": await group_lines_of(self.runtime.sessions, who.telegram_id)}

    async def forget_group_lines(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/group-lines/forget: blank every line they said in any group, as
        `/forget confirm groups` does; their private memory is not touched.

        Keyed by the signed Telegram id, like the chat's option: a person with no private memory
        (who only ever spoke in groups) can delete their lines too.
        """
        runtime = self.runtime
        await forget_group_words(
            runtime.sessions, who.telegram_id, caches=runtime.jobs.caches, guard=runtime.guard
        )
        left = await group_lines_of(runtime.sessions, who.telegram_id)
        logger.info("group lines blanked in the timeline", extra={"left": left})
        return {"lines": left}
