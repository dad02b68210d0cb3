"""Where a fact comes from: the one read of its sources returns only lines a person wrote in the
owner's own transcript (never the companion's, another person's, a group's in a private read or a
private chat's in a group's), dated in the owner's time zone; a fact the person asked for, one said
in a call and one whose lines are gone each say so; the chat tool's lookup finds only the owner's."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import delete
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.group_forget import forget_group_words
from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.memory.provenance import NONE_LEFT, explain, read_sources, source_text, sources_dict
from agent.turn.transcript import Speaker, write_message
from bench.clock import FrozenClock
from db.models import TranscriptMessage, User, UserFact
from db.repositories.facts import FactRepository
from db.repositories.transcript import TranscriptRepository
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases

TOKYO = ZoneInfo("Asia/Tokyo")
ANA_TG = 71


async def _said(
    sessions: async_sessionmaker[AsyncSession],
    owner: User,
    role: str,
    content: str,
    at: datetime,
    speaker: Speaker | None = None,
) -> int:
    async with sessions() as session, session.begin():
        row = await write_message(session, owner, role=role, content=content, sent_at=at, speaker=speaker)
        return row.id


async def _facts(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> dict[str, UserFact]:
    async with sessions() as session:
        return {f.content: f for f in await FactRepository(session).held(owner_id)}


async def test_a_facts_sources_are_its_owners_own_lines_within_the_walls(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA_TG}", now=now, timezone="Asia/Tokyo", name="Ana", telegram_id=ANA_TG
    )
    bo, _ = await get_or_create_user(sessions, key="cli:bo", now=now, timezone="UTC", name="Bo")
    group, _ = await group_owner(sessions, chat_id=-7001, title="Band", now=now, timezone="UTC")
    # 23:30 UTC on 1 March is already 2 March in Tokyo, where Ana lives.
    first = datetime(2026, 3, 1, 23, 30, tzinfo=now.tzinfo)
    moved = await _said(sessions, ana, "user", "I moved to Porto last week", first)
    again = await _said(sessions, ana, "user", "Porto\n  is lovely", first + timedelta(days=1))
    asked = await _said(sessions, ana, "assistant", "So you live in Porto now?", first)
    sister = await _said(sessions, ana, "user", "My sister Ines called", first)
    bos = await _said(sessions, bo, "user", "I live in Porto too", first)
    cello = await _said(sessions, group, "user", "I'm bringing the cello", first, Speaker(ANA_TG, "Ana"))
    answer = await _said(sessions, group, "assistant", "Great, a cello!", first)
    every = [moved, again, asked, sister, bos, cello, answer]
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        # The extraction named every line, its own and others': only Ana's own words may show.
        await facts.add_sourced(ana.id, None, [("Ana lives in Porto", every)], now, source="extraction")
        await facts.add_sourced(ana.id, None, [("Ana has a sister", [sister])], now, source="extraction")
        await add_facts(facts, ana.id, None, ["Ana is allergic to nuts"], now, source="tool")
        await add_facts(facts, ana.id, None, ["Ana likes green tea"], now, source="voice")
        await facts.add_sourced(bo.id, None, [("Bo lives in Porto", [bos, moved])], now, source="extraction")
        await facts.add_sourced(
            group.id, None, [("Ana is bringing the cello", every)], now, source="extraction"
        )
        # Ana's line about her sister is gone (its conversation deleted).
        await session.execute(delete(TranscriptMessage).where(TranscriptMessage.id == sister))

    async with sessions() as session:
        lines = TranscriptRepository(session)
        assert set(await lines.said_lines(ana.id, every, chars=100)) == {moved, again}
        assert set(await lines.said_lines(bo.id, every, chars=100)) == {bos}
        in_group = await lines.said_lines(group.id, every, chars=5)
        assert list(in_group) == [cello] and in_group[cello].speaker_name == "Ana"
        assert in_group[cello].text == "I'm b"  # cut in the query

    held = await _facts(sessions, ana.id)
    async with sessions() as session:
        sources = await read_sources(session, ana.id, list(held.values()), TOKYO)
    said = {content: sources[f.id] for content, f in held.items()}
    porto = said["Ana lives in Porto"]
    assert [(line.message_id, line.at.date().isoformat(), line.text) for line in porto.lines] == [
        (moved, "2026-03-02", "I moved to Porto last week"),
        (again, "2026-03-03", "Porto is lovely"),
    ]
    assert source_text(porto) == "you said on 2 Mar 2026: “I moved to Porto last week” (and 1 more time)"
    assert source_text(porto, quote_chars=8) == "you said on 2 Mar 2026: “I moved…” (and 1 more time)"
    assert source_text(said["Ana is allergic to nuts"]) == "you asked me to remember this on 3 Mar 2026"
    assert source_text(said["Ana likes green tea"]) == "said in a call on 3 Mar 2026"
    assert said["Ana has a sister"].none_left and source_text(said["Ana has a sister"]) == NONE_LEFT
    assert sources_dict(said["Ana has a sister"])["origin"] == "none"

    (band,) = (await _facts(sessions, group.id)).values()
    async with sessions() as session:
        group_sources = (await read_sources(session, group.id, [band], ZoneInfo("UTC")))[band.id]
    assert source_text(group_sources, group=True) == "Ana said on 1 Mar 2026: “I'm bringing the cello”"

    # Ana deletes her words in groups: the group's fact has no source left.
    assert await forget_group_words(sessions, ANA_TG) == 1
    async with sessions() as session:
        group_sources = (await read_sources(session, group.id, [band], ZoneInfo("UTC")))[band.id]
    assert group_sources.none_left and group_sources.lines == ()

    # The chat tool's lookup: by words or by id, the owner's held facts only.
    (found,) = await explain(sessions, ana.id, TOKYO, about="lives in Porto")
    shown = found.as_dict()
    assert (shown["fact"], shown["origin"], [line["text"] for line in shown["lines"]]) == (
        "Ana lives in Porto",
        "said",
        ["I moved to Porto last week", "Porto is lovely"],
    )
    assert shown["lines"][0]["at"] == "2026-03-02T08:30+09:00"
    bos_fact = (await _facts(sessions, bo.id))["Bo lives in Porto"]
    assert await explain(sessions, ana.id, TOKYO, fact_id=bos_fact.id) == []
    assert await explain(sessions, ana.id, TOKYO, fact_id=band.id) == []
    (own,) = await explain(sessions, bo.id, TOKYO, fact_id=bos_fact.id)
    assert [line.text for line in own.sources.lines] == ["I live in Porto too"]
