"""memory_pin, memory_reword and memory_sources through real turns driven by PydanticAI's
FunctionModel: a fact the person asks to have remembered above all is pinned (saved first when new),
one they want put otherwise is reworded in place, "why do you think that?" is answered from their own
lines, and none ever reaches another person's facts."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.chat.activity import doing
from agent.chat.fact_tools import NO_MATCH
from agent.core.settings import Settings
from agent.memory.listing import read_listing
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import UserFact
from db.repositories.facts import FactRepository
from tests.agent.test_tools import ToolScript, make_service
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def _rows(sessions: async_sessionmaker[AsyncSession], user_id: int) -> list[tuple[str, bool, bool]]:
    """(content, pinned, held) of the user's facts, oldest first."""
    async with sessions() as session:
        rows = await session.execute(
            select(UserFact.content, UserFact.pinned, UserFact.invalidated_at)
            .where(UserFact.user_id == user_id)
            .order_by(UserFact.id)
        )
        return [(content, pinned, gone is None) for content, pinned, gone in rows]


async def test_pin_and_reword_the_persons_own_facts(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    ana, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana")
    bea, _ = await get_or_create_user(sessions, key="cli:bea", now=clock.now(), timezone="UTC", name="Bea")
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await add_facts(
            facts, ana.id, None, ["Ana plays the cello", "Ana likes green tea"], clock.now(), source="tool"
        )
        await add_facts(facts, bea.id, None, ["Bea plays the cello"], clock.now(), source="tool")
    at = clock.now() + timedelta(minutes=5)

    pin = ToolScript([("memory_pin", {"fact": "plays the cello"})])
    service.model.function = pin  # type: ignore[attr-defined]
    await service.reply(Incoming(owner=ana.id, text="Remember above all that I play the cello", sent_at=at))
    assert {"memory_pin", "memory_reword"} <= set(pin.tool_names)
    assert pin.returns[0]["pinned"] is True and pin.returns[0]["fact"] == "Ana plays the cello"
    assert pin.returns[0]["saved"] is False

    # Something not held yet is saved, pinned.
    new = ToolScript([("memory_pin", {"fact": "Ana is allergic to nuts"})])
    service.model.function = new  # type: ignore[attr-defined]
    await service.reply(
        Incoming(owner=ana.id, text="Never forget I'm allergic to nuts", sent_at=at + timedelta(minutes=1))
    )
    assert new.returns[0]["saved"] is True and new.returns[0]["pinned"] is True

    # Reworded in place: the same fact, still pinned; an empty wording is sent back to the model.
    worded = ToolScript(
        [
            ("memory_reword", {"fact": "plays the cello", "wording": "  "}),
            (
                "memory_reword",
                {"fact": "plays the cello", "wording": "Ana plays the cello in a string quartet"},
            ),
            ("memory_reword", {"fact": "keeps bees", "wording": "Ana keeps bees"}),
        ]
    )
    service.model.function = worded  # type: ignore[attr-defined]
    await service.reply(
        Incoming(
            owner=ana.id,
            text="Actually, say it as: I play the cello in a string quartet",
            sent_at=at + timedelta(minutes=2),
        )
    )
    assert len(worded.retries) == 1 and "empty" in worded.retries[0]
    assert worded.returns[0]["reworded"] is True and worded.returns[0]["before"] == "Ana plays the cello"
    assert worded.returns[0]["now"] == "Ana plays the cello in a string quartet"
    assert worded.returns[1] == {"reworded": False, "note": worded.returns[1]["note"]}

    # Unpinned on request.
    unpin = ToolScript([("memory_pin", {"fact": "allergic to nuts", "pinned": False})])
    service.model.function = unpin  # type: ignore[attr-defined]
    await service.reply(
        Incoming(
            owner=ana.id, text="The nuts thing doesn't need to come first", sent_at=at + timedelta(minutes=3)
        )
    )
    assert unpin.returns[0]["pinned"] is False

    assert await _rows(sessions, ana.id) == [
        ("Ana plays the cello in a string quartet", True, True),
        ("Ana likes green tea", False, True),
        ("Ana is allergic to nuts", False, True),
    ]
    assert await _rows(sessions, bea.id) == [("Bea plays the cello", False, True)]  # never hers
    # The profile puts the pinned fact first.
    async with sessions() as session:
        listing = await read_listing(
            session, ana.id, now=at + timedelta(minutes=4), zone=ZoneInfo("UTC"), budget_tokens=700
        )
    assert (
        listing.profile[0].content == "Ana plays the cello in a string quartet" and listing.profile[0].pinned
    )


async def test_why_do_you_think_that_is_answered_from_the_persons_own_lines(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    ana, _ = await get_or_create_user(
        sessions, key="cli:ana", now=clock.now(), timezone="America/New_York", name="Ana"
    )
    bea, _ = await get_or_create_user(sessions, key="cli:bea", now=clock.now(), timezone="UTC", name="Bea")
    said = await service.reply(
        Incoming(owner=ana.id, text="I work night shifts at the hospital", sent_at=clock.now())
    )
    hers = await service.reply(Incoming(owner=bea.id, text="I'm a nurse too", sent_at=clock.now()))
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await facts.add_sourced(
            ana.id, None, [("Ana works as a nurse", [said.message_id])], clock.now(), source="extraction"
        )
        await add_facts(facts, ana.id, None, ["Ana likes green tea"], clock.now(), source="tool")
        await facts.add_sourced(
            bea.id,
            None,
            [("Bea works as a nurse", [hers.message_id, said.message_id])],
            clock.now(),
            source="extraction",
        )
        (beas,) = await facts.held(bea.id)
    why = ToolScript(
        [
            ("memory_sources", {"fact": "works as a nurse"}),
            ("memory_sources", {"fact_id": beas.id}),
            ("memory_sources", {}),
            ("memory_sources", {"fact": "green tea"}),
        ]
    )
    service.model.function = why  # type: ignore[attr-defined]
    await service.reply(
        Incoming(
            owner=ana.id, text="Why do you think I'm a nurse?", sent_at=clock.now() + timedelta(minutes=1)
        )
    )
    assert "memory_sources" in why.tool_names
    nurse, missing, tea = why.returns
    (fact,) = nurse["facts"]
    assert (fact["fact"], fact["origin"], fact["lines"]) == (
        "Ana works as a nurse",
        "said",
        # Her line, at her local time (09:00 UTC is 04:00 in New York).
        [
            {
                "text": "I work night shifts at the hospital",
                "at": "2026-03-03T04:00-05:00",
                "day": "2026-03-03",
            }
        ],
    )
    assert missing == {"facts": [], "note": NO_MATCH}  # Bea's fact is not Ana's to explain
    assert len(why.retries) == 1 and "say which fact" in why.retries[0]
    assert [(f["fact"], f["origin"], f["says"]) for f in tea["facts"]] == [
        ("Ana likes green tea", "asked", "you asked me to remember this on 3 Mar 2026")
    ]
    await service.close()


def test_the_person_reads_what_each_tool_is_doing() -> None:
    assert doing("memory_pin", {"fact": "allergic to nuts"}) == "Putting that first in what I remember…"
    assert doing("memory_reword", {"fact": "nurse"}) == "Putting that in your words…"
    assert doing("memory_sources", {"fact": "nurse"}) == "Looking up where I got that…"
