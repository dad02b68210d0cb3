"""Plain-text reports behind /memory and the admin commands; Telegram-free, so tests read them directly."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import REFUSED, STRANGERS, AccessListing
from agent.account.groups import GROUP, PERSON, is_group
from agent.context.snapshot import format_snapshot
from agent.core.access_keys import is_id
from agent.core.clock import local_day, zone_of
from agent.core.settings import Settings
from agent.reminders.store import reminder_stats
from agent.reports.spend import apart, format_spend, format_usage
from agent.turn.daily_tokens import COUNTERS
from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    TranscriptMessage,
    User,
    UserFact,
)
from db.repositories.access import AccessRepository
from db.repositories.briefings import BriefingRepository
from db.repositories.facts import FactRepository
from db.repositories.import_queue import ImportQueueRepository
from db.repositories.prompts import PromptRepository
from db.repositories.touchpoints import TouchpointRepository
from db.repositories.usage import UsageRepository, UsageRow
from db.repositories.users import UserRepository
from db.work import dead_items

MEMORY_THREADS = 5
MEMORY_FACTS = 5
DEAD_SHOWN = 3


def _join(items: Any) -> str:
    if isinstance(items, list | tuple):
        return ", ".join(str(i) for i in items) or "none"
    return str(items) if items else "none"


def _local_when(at: datetime, timezone: str) -> str:
    """A planned time as the user reads it: "Fri 6 Mar, 15:00"."""
    local = at.astimezone(zone_of(timezone))
    return f"{local:%a} {local.day} {local:%b}, {local:%H:%M}"


async def memory_report(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    now: datetime,
    *,
    facts: bool = True,
) -> str:
    """What the bot remembers about a user: profile, open threads, planned follow-ups, today's summary,
    the newest facts of the one list the prompts read (`facts=False` leaves them to the listing that
    follows, agent/memory/listing.py)."""
    async with sessions() as session:
        user = await session.get(User, user_id)
        if user is None:
            return "I don't know anything about you yet."
        threads = (
            (
                await session.execute(
                    select(ConversationThread.content)
                    .where(ConversationThread.user_id == user_id, ConversationThread.status == "open")
                    .order_by(ConversationThread.created_at.desc(), ConversationThread.id.desc())
                    .limit(MEMORY_THREADS)
                )
            )
            .scalars()
            .all()
        )
        today = await session.scalar(
            select(DaySegment).where(
                DaySegment.user_id == user_id, DaySegment.day == local_day(now, user.timezone)
            )
        )
        planned = await TouchpointRepository(session).planned_for(user_id)
        known: list[str] = []
        if facts:
            held = await FactRepository(session).held(user_id, newest_first=True, limit=MEMORY_FACTS)
            known = [f.content for f in held]
    profile = user.profile or {}
    # A group's own memory (agent/account/groups.py): no profile of a person to show.
    who = (
        ["Here's what I remember of this group.", "", f"This group: time zone {user.timezone}."]
        if is_group(user)
        else [
            "Here's what I remember about you.",
            "",
            f"You: {user.name or 'no name yet'}, time zone {user.timezone}.",
            f"Interests: {_join(profile.get('interests'))}.",
            f"Boundaries: {_join(profile.get('boundaries'))}.",
        ]
    )
    lines = [
        *who,
        "",
        "Things we left open:" if threads else "Nothing left open between us.",
        *(f"- {t}" for t in threads),
        *(["", "I plan to come back to:"] if planned else []),
        *(f"- {p.reason} ({_local_when(p.due_at, user.timezone)})" for p in planned),
        "",
        f"Today so far: {today.summary.strip()}" if today and today.summary else "No summary of today yet.",
        *(["", "A few things I know:" if known else "No saved facts yet."] if facts else []),
        *(f"- {f}" for f in known),
    ]
    return "\n".join(lines)


async def stats_report(
    sessions: async_sessionmaker[AsyncSession],
    now: datetime,
    *,
    queue_depth: int | None,
    failures: int | None,
    settings: Settings | None = None,
) -> str:
    """Users, activity, job queue, failures, model use and its estimated cost (priced when `settings`
    name the models), refused strangers and budget refusals of the UTC day, and dead updates."""
    async with sessions() as session:
        users = await _owners_by_kind(session)
        active = await _owners_by_kind(session, User.last_message_at > now - timedelta(days=1))
        conversations = await session.scalar(select(func.count()).select_from(Conversation))
        messages = await session.scalar(select(func.count()).select_from(TranscriptMessage))
        apologies = await session.scalar(
            select(func.count())
            .select_from(TranscriptMessage)
            .where(TranscriptMessage.kind == "apology", TranscriptMessage.sent_at > now - timedelta(days=1))
        )
        today = _utc_day(now)
        usage_today, imports_today = apart(await UsageRepository(session).totals_by_kind(since=today))
        usage_week, imports_week = apart(
            await UsageRepository(session).totals_by_kind(since=today - timedelta(days=6))
        )
        waiting = await ImportQueueRepository(session).waiting_count()
        processed_week = await session.scalar(
            select(func.count())
            .select_from(Conversation)
            .where(Conversation.status == "processed", Conversation.ended_at >= now - timedelta(days=7))
        )
        counts = await AccessRepository(session).counts(today)
        dead = await dead_items(session, last=DEAD_SHOWN)
        touchpoints = await TouchpointRepository(session).stats(since=now - timedelta(days=7))
        reminders = await reminder_stats(session, since=now - timedelta(days=7))
    return "\n".join(
        [
            f"users: {_people_and_groups(users)}",
            f"active in the last 24 h: {_people_and_groups(active)}",
            f"conversations: {conversations or 0}",
            f"messages: {messages or 0}",
            f"job queue depth: {'n/a' if queue_depth is None else queue_depth}",
            f"failed post-processing: {'n/a' if failures is None else failures}",
            f"model failures in the last 24 h: {apologies or 0}",
            f"model use today (UTC): {format_usage(usage_today)}",
            *format_spend(usage_today, settings),
            f"model use in the last 7 days: {format_usage(usage_week)}",
            *format_spend(usage_week, settings),
            f"imports (apart from the above): {waiting} imported conversations waiting; today (UTC) "
            f"{format_usage(imports_today)}",
            *format_spend(imports_today, settings),
            f"imports in the last 7 days: {format_usage(imports_week)}",
            *format_spend(imports_week, settings),
            format_briefings(usage_week, processed_week or 0),
            f"refused today (UTC): {counts.get(REFUSED, 0)} updates from people not allowed; "
            f"{counts.get(STRANGERS, 0)} strangers told the bot is private",
            f"budget refusals today (UTC): {counts.get(COUNTERS['user'], 0)} over USER_DAILY_TOKENS, "
            f"{counts.get(COUNTERS['group'], 0)} over GROUP_DAILY_TOKENS, "
            f"{counts.get(COUNTERS['bot'], 0)} over DAILY_TOKENS",
            f"touchpoints: {touchpoints.planned} planned; in the last 7 days {touchpoints.sent} sent "
            f"({touchpoints.answered_within_day} answered within 24 h), {touchpoints.declined} declined by "
            f"the model, {touchpoints.cancelled} cancelled",
            f"reminders in the last 7 days: {reminders.set} set, {reminders.sent} sent, "
            f"{reminders.snoozed} snoozed, {reminders.cancelled} cancelled",
            f"given up after their last attempt: {dead.counts['tidying']} people's tidying, "
            f"{dead.counts['touchpoints']} touchpoints",
            f"dead updates (kept INBOX_RETENTION_HOURS): {dead.counts['updates']}",
            *(f"  {at.isoformat(timespec='seconds')}: {why[:200]}" for at, why in dead.newest_updates),
        ]
    )


async def _owners_by_kind(session: AsyncSession, *where: ColumnElement[bool]) -> dict[str, int]:
    """How many `users` rows of each kind (people, groups) match `where`."""
    rows = await session.execute(select(User.kind, func.count()).where(*where).group_by(User.kind))
    return {kind: int(n) for kind, n in rows.all()}


def _people_and_groups(counts: dict[str, int]) -> str:
    """ "3 people, 1 group": a group chat's memory is a `users` row too, but not a person."""
    people, groups = counts.get(PERSON, 0), counts.get(GROUP, 0)
    return f"{people} {'person' if people == 1 else 'people'}, {groups} group{'' if groups == 1 else 's'}"


def access_report(listing: AccessListing) -> str:
    """What /access shows: the mode, who is allowed by setting, and the admins' rules."""

    def shown(key: str) -> str:
        return key if is_id(key) else f"@{key}"

    allowed = [shown(k) for k, rule in sorted(listing.rules.items()) if rule == "allow"]
    denied = [shown(k) for k, rule in sorted(listing.rules.items()) if rule == "deny"]
    return "\n".join(
        [
            f"access: {listing.mode}"
            + (" (everyone not denied)" if listing.mode == "open" else " (only the people below)"),
            f"admins (ADMIN_IDS, always allowed): {_join(list(listing.admins))}",
            f"ALLOWED_USERS: {_join([shown(k) for k in listing.allowed_by_setting])}",
            f"allowed by /allow: {_join(allowed)}",
            f"denied by /deny: {_join(denied)}",
        ]
    )


def format_briefings(rows: list[UsageRow], processed: int) -> str:
    """What writing briefings cost over the rows' days, per processed conversation and per call."""
    spend = next((r for r in rows if r.kind == "briefing"), None)
    if spend is None or spend.calls == 0:
        return "briefings in the last 7 days: none written"
    per_conversation = f"{spend.calls / processed:.2f}" if processed else "n/a"
    return (
        f"briefings in the last 7 days: {spend.calls} calls for {processed} processed conversations"
        f" ({per_conversation} per conversation), {spend.input_tokens // spend.calls} tokens in /"
        f" {spend.output_tokens // spend.calls} out per call"
    )


async def _owner(session: AsyncSession, telegram_id: int) -> User | None:
    """A person by their Telegram id, or a group by its chat id (negative: Telegram's people are not)."""
    users = UserRepository(session)
    return await (users.by_chat_id(telegram_id) if telegram_id < 0 else users.by_telegram_id(telegram_id))


async def user_report(sessions: async_sessionmaker[AsyncSession], telegram_id: int, now: datetime) -> str:
    """One person's (or, by a group chat id, one group's) profile, counts, last activity and model use
    per day."""
    async with sessions() as session:
        user = await _owner(session, telegram_id)
        if user is None:
            return f"No user or group with Telegram id {telegram_id}."
        conversations = await session.scalar(
            select(func.count()).select_from(Conversation).where(Conversation.user_id == user.id)
        )
        messages = await session.scalar(
            select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.user_id == user.id)
        )
        facts = await session.scalar(
            select(func.count()).select_from(UserFact).where(UserFact.user_id == user.id)
        )
        usage = await UsageRepository(session).for_user(user.id, since=_utc_day(now) - timedelta(days=6))
    last = user.last_message_at.isoformat(timespec="minutes") if user.last_message_at else "never"
    who = (
        [f"group {user.id} (chat {telegram_id}): {user.name or '(no title)'}", f"time zone: {user.timezone}"]
        if is_group(user)
        else [
            f"user {user.id} (telegram {telegram_id}): {user.name or '(no name)'}",
            f"time zone: {user.timezone}; onboarding: {user.onboarding_status}",
            f"profile: {json.dumps(user.profile or {}, ensure_ascii=False)}",
        ]
    )
    return "\n".join(
        [
            *who,
            f"conversations: {conversations or 0}; messages: {messages or 0}; facts: {facts or 0}",
            f"joined: {user.created_at.isoformat(timespec='minutes')}; last message: {last}",
            "model use per day (UTC, last 7 days):" if usage else "model use in the last 7 days: none",
            *(f"  {day.isoformat()}: {format_usage(rows)}" for day, rows in _by_day(usage)),
        ]
    )


def _utc_day(now: datetime) -> date:
    return now.astimezone(UTC).date()


def _by_day(rows: list[UsageRow]) -> list[tuple[date, list[UsageRow]]]:
    days: dict[date, list[UsageRow]] = {}
    for row in rows:
        if row.day is not None:
            days.setdefault(row.day, []).append(row)
    return list(days.items())


async def prompt_report(sessions: async_sessionmaker[AsyncSession], telegram_id: int) -> str:
    """The last context snapshot of a person (or, by a group chat id, a group): tiers, tokens per tier,
    what was left out."""
    async with sessions() as session:
        user = await _owner(session, telegram_id)
        if user is None:
            return f"No user or group with Telegram id {telegram_id}."
        prompt = await PromptRepository(session).latest_for(user.id)
        briefing = await BriefingRepository(session).get(user.id)
    if prompt is None:
        return f"No turn recorded yet for Telegram id {telegram_id}."
    header = f"last context of user {user.id}, {prompt.created_at.isoformat(timespec='seconds')}"
    report = f"{header}\n{format_snapshot(dict(prompt.context_snapshot or {}))}"
    if briefing is not None:
        written = briefing.written_at.isoformat(timespec="seconds")
        report += f"\n\nStored briefing ({written}):\n{briefing.text}\n\nVoice variant:\n{briefing.voice}"
    return report
