"""Two people's stored conversations over three days, written the way the bot writes them.

Messages go through the repositories the turn uses, day summaries (and their system notes) through
the day-summaries job's store, a session compaction as the compactor stores it. Ana (Telegram id
ANA) has three days in Europe/Berlin; Ben (BEN) one day with a word only he said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import local_day
from db.models import Conversation, DaySegment, HistoryCompaction, TranscriptMessage
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.transcript import TranscriptRepository

ANA, BEN = 101, 202
ZONE = "Europe/Berlin"
# The tests' clock: 09:00 UTC on Tuesday 3 March 2026 (10:00 in Berlin).
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
FOLLOW_UP = "How did the slow practice on the opening chords go?"

SUMMARY_1 = """## Summary
Ana planned her trip to Porto and booked the train.

## Goals
- visit the Serralves museum

## Decisions
- take the night train

## Open loops
- none

## Next steps
- pack the camera"""

SUMMARY_2 = """## Summary
Ana talked about her cello rehearsal and the concert on Friday.

## Goals
- play the Elgar concerto well

## Decisions
- practise every evening

## Open loops
- whether to ask Marta to turn pages

## Next steps
- ask how the rehearsal went"""


@dataclass
class Seeded:
    """Ids the tests look up."""

    ana_user: int = 0
    ben_user: int = 0
    segments: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)


async def _say(
    session: AsyncSession,
    user_id: int,
    conversation: Conversation,
    segment: DaySegment,
    role: str,
    text: str,
    at: datetime,
) -> TranscriptMessage:
    message = await TranscriptRepository(session).add(
        user_id=user_id,
        conversation_id=conversation.id,
        role=role,
        content=text,
        sent_at=at,
        day_segment_id=segment.id,
    )
    DaySegmentRepository.record_message(segment, message.id, at)
    return message


async def _day(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    start: datetime,
    lines: list[str],
    *,
    summary_after: int | None = None,
    summary: str = SUMMARY_2,
    final: bool = False,
) -> tuple[int, list[int], int]:
    """One conversation of alternating user/assistant lines a minute apart; maybe summarised."""
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user_id, status="closed", started_at=start, last_message_at=start, messages=[]
        )
        session.add(conversation)
        await session.flush()
        segment = await DaySegmentRepository(session).open(user_id, local_day(start, ZONE), ZONE, start)
        ids: list[int] = []
        for i, text in enumerate(lines):
            at = start + timedelta(minutes=i)
            role = "user" if i % 2 == 0 else "assistant"
            message = await _say(session, user_id, conversation, segment, role, text, at)
            ids.append(message.id)
            if summary_after is not None and i + 1 == summary_after:
                await session.flush()
                await DaySummaryRepository(session).store(
                    segment,
                    expected_last_id=None,
                    summary=summary,
                    key_moments=[],
                    last_message=message,
                    at=at,
                    final=final,
                )
                await session.refresh(segment)
        return segment.id, ids, conversation.id


async def seed_timeline(sessions: async_sessionmaker[AsyncSession]) -> Seeded:
    """Ana's Sunday (final), Monday (summarised half way, then more, a compaction), Tuesday (today)."""
    seeded = Seeded()
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=NOW, timezone=ZONE, name="Ana", telegram_id=ANA
    )
    ben, _ = await get_or_create_user(
        sessions, key=f"telegram:{BEN}", now=NOW, timezone=ZONE, name="Ben", telegram_id=BEN
    )
    seeded.ana_user, seeded.ben_user = ana.id, ben.id
    sunday, sunday_ids, _ = await _day(
        sessions,
        ana.id,
        datetime(2026, 3, 1, 17, 0, tzinfo=UTC),
        ["I booked the night train to Porto!", "Wonderful, which day do you leave?", "Thursday night."],
        summary_after=3,
        summary=SUMMARY_1,
        final=True,
    )
    monday_lines = [
        "Rehearsal went long today, the Elgar is hard.",
        "The Elgar concerto is a beast. Which movement hurts most?",
        "The first one, the opening chords.",
        "Slow practice with a metronome helps there.",
        "Do you think Marta would turn pages for me?",
        "Ask her, she offered last time.",
    ]
    monday, monday_ids, monday_conversation = await _day(
        sessions, ana.id, datetime(2026, 3, 2, 8, 5, tzinfo=UTC), monday_lines, summary_after=4
    )
    today, today_ids, _ = await _day(
        sessions,
        ana.id,
        datetime(2026, 3, 3, 7, 30, tzinfo=UTC),
        ["Good morning! The concert is on Friday.", "Good morning Ana! Nervous or excited?"],
    )
    async with sessions() as session, session.begin():
        # The bot wrote first an hour later: a follow-up, shown as such.
        at = datetime(2026, 3, 3, 8, 30, tzinfo=UTC)
        conversation = Conversation(
            user_id=ana.id, status="active", kind="proactive", started_at=at, last_message_at=at, messages=[]
        )
        session.add(conversation)
        await session.flush()
        segment = await DaySegmentRepository(session).open(ana.id, local_day(at, ZONE), ZONE, at)
        proactive = await TranscriptRepository(session).add(
            user_id=ana.id,
            conversation_id=conversation.id,
            role="assistant",
            kind="proactive",
            content=FOLLOW_UP,
            sent_at=at,
            day_segment_id=segment.id,
        )
        DaySegmentRepository.record_message(segment, proactive.id, at)
    ben_day, ben_ids, _ = await _day(
        sessions, ben.id, datetime(2026, 3, 2, 10, 0, tzinfo=UTC), ["My zeppelin model is finished.", "Wow!"]
    )
    async with sessions() as session, session.begin():
        session.add(
            HistoryCompaction(
                user_id=ana.id,
                conversation_id=monday_conversation,
                covered_messages=4,
                last_message_digest="0" * 64,
                summary="Ana and Nikita discussed the Elgar rehearsal and slow practice.",
                summary_tokens=12,
                model="test",
                created_at=datetime(2026, 3, 2, 8, 8, 30, tzinfo=UTC),
            )
        )
    seeded.segments = {"sunday": sunday, "monday": monday, "today": today, "ben": ben_day}
    seeded.messages = {
        "train": sunday_ids[0],
        "rehearsal": monday_ids[0],
        "marta": monday_ids[4],
        "concert": today_ids[0],
        "zeppelin": ben_ids[0],
    }
    return seeded
