"""A member's own words in groups, for their private conversation_search (GROUP_RECALL_OWN_WORDS).

A group's memory belongs to the group's owner row, so a person's search never reaches it. With
the setting on, one more query reads the transcript rows of group owners whose speaker is this
person's Telegram id, and only those: never another member's lines, the bot's answers, or a
group's summaries, threads or facts. The speaker filter is in the query itself (by the speaker
index), so the model cannot widen it. A member's lines in groups are few, so the words are
matched by a substring scan over them rather than through the per-owner full-text indexes.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import GROUP
from agent.core.clock import local_day
from agent.search.dates import describe_day
from agent.search.fts import query_terms
from agent.search.query import SearchHit, SearchQuery, make_snippet, without_speakers
from db.models import TranscriptMessage, User

# The newest matching lines considered; a member's group lines matching a query are few.
SCAN = 500


async def own_group_words(
    session: AsyncSession,
    telegram_id: int,
    query: SearchQuery,
    *,
    timezone: str,
    speaker: str,
    snippet_chars: int,
) -> list[SearchHit]:
    """The person's own lines in groups that match the query, best first (share of terms matched)."""
    terms = query_terms(without_speakers(query.text, query.speakers))
    if not terms:
        return []
    content = func.lower(TranscriptMessage.content)
    stmt = (
        select(TranscriptMessage.id, TranscriptMessage.content, TranscriptMessage.sent_at, User.name)
        .join(User, User.id == TranscriptMessage.user_id)
        .where(
            and_(
                User.kind == GROUP,
                TranscriptMessage.speaker_telegram_id == telegram_id,
                TranscriptMessage.role == "user",
                TranscriptMessage.content != "",
                or_(*(content.contains(term, autoescape=True) for term in terms)),
            )
        )
        .order_by(TranscriptMessage.id.desc())
        .limit(SCAN)
    )
    if query.since is not None:
        stmt = stmt.where(TranscriptMessage.sent_at >= query.since)
    if query.before is not None:
        stmt = stmt.where(TranscriptMessage.sent_at < query.before)
    ranked: list[tuple[float, int, SearchHit]] = []
    for message_id, text, sent_at, title in (await session.execute(stmt)).all():
        lowered = text.lower()
        score = sum(term in lowered for term in terms) / len(terms)
        day = local_day(sent_at, timezone)
        if query.day is not None and day != query.day:
            continue
        if query.min_score is not None and score < query.min_score:
            continue
        hit = SearchHit(
            kind="message",
            day_label=day.isoformat(),
            day_segment_id=None,
            score=round(score, 4),
            snippet=make_snippet(text, terms, snippet_chars),
            role="user",
            sent_at=_minutes(sent_at),
            speaker=speaker,
            when=describe_day(day, query.today) if query.today is not None else None,
            group=title or "a group",
        )
        ranked.append((score, message_id, hit))
    ranked.sort(key=lambda item: (-item[0], -item[1]))
    return [hit for _, _, hit in ranked[: query.limit]]


def _minutes(at: datetime) -> str:
    return at.isoformat(timespec="minutes")


def merged(hits: list[SearchHit], own: list[SearchHit], limit: int) -> list[SearchHit]:
    """Summaries first as ranked, then private messages and own group lines by score."""
    summaries = [h for h in hits if h.kind == "summary"]
    messages = sorted([h for h in hits if h.kind == "message"] + own, key=lambda h: -h.score)
    return [*summaries, *messages][:limit]
