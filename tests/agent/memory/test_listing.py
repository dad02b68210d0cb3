"""The listing /memory and the Mini App show: the profile exactly as the prompt chooses it, then what
the budget left out, the hidden facts and past plans, each with the local day it comes from; one
owner's listing never holds another's facts, and a change to another owner's fact finds nothing."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.errors import FactRejectedError
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.memory.listing import listing_lines, read_listing, reword, set_flag
from agent.memory.profile import choose_profile
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from bench.clock import FrozenClock
from db.models import TranscriptMessage, UserFact
from db.repositories.facts import FactRepository
from tests.facts import add_facts
from tests.jobs.conftest import seed_conversation

pytestmark = pytest.mark.both_databases

LISBON = ZoneInfo("Europe/Lisbon")


async def _seed(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock) -> tuple[int, int]:
    # Ana spoke at 23:30 UTC on 1 March: already 2 March in Tokyo, still 1 March in Lisbon.
    said = datetime(2026, 3, 1, 23, 30, tzinfo=clock.now().tzinfo)
    ana, conversation = await seed_conversation(sessions, start=said, texts=["I'm a nurse", "ok"])
    bo, _ = await seed_conversation(sessions, start=said, texts=["hi"], user_key="cli:bo")
    async with sessions() as session, session.begin():
        first = await session.scalar(
            select(TranscriptMessage.id)
            .where(TranscriptMessage.user_id == ana)
            .order_by(TranscriptMessage.id)
        )
        facts = FactRepository(session)
        await facts.add_sourced(
            ana, conversation, [("Ana works as a nurse", [first])], clock.now(), source="extraction"
        )
        await add_facts(
            facts,
            ana,
            None,
            ["Ana likes green tea", "Ana's sister is called Ines", "Ana does not want to talk about her ex"],
            clock.now(),
            source="tool",
        )
        await add_facts(
            facts, ana, None, ["Ana has a dentist appointment on Monday"], clock.now(), source="tool"
        )
        await add_facts(facts, bo, None, ["Bo keeps bees"], clock.now(), source="tool")
        held = {f.content: f for f in await facts.held(ana)}
        await facts.set_flags(ana, held["Ana likes green tea"].id, clock.now(), pinned=True)
        await facts.set_flags(
            ana, held["Ana does not want to talk about her ex"].id, clock.now(), hidden=True
        )
        await session.execute(
            update(UserFact)
            .where(UserFact.id == held["Ana has a dentist appointment on Monday"].id)
            .values(valid_until=clock.now() - timedelta(days=1))
        )
    return ana, bo


async def test_the_profile_comes_first_as_the_prompt_chooses_it_then_the_rest(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana, _ = await _seed(sessions, clock)
    count = get_counter().count
    async with sessions() as session:
        held = await FactRepository(session).held(ana)
        # A budget for two facts: the rest of what is in effect is recalled when relevant.
        budget = sum(
            count(f.content) + 2 for f in held if f.content in ("Ana likes green tea", "Ana works as a nurse")
        )
        chosen = choose_profile(held, budget_tokens=budget, count=count, now=clock.now())
        listing = await read_listing(session, ana, now=clock.now(), zone=LISBON, budget_tokens=budget)
    assert [f.id for f in listing.profile] == [f.id for f in chosen.facts] and len(chosen.left_out) >= 1
    assert listing.profile[0].content == "Ana likes green tea" and listing.profile[0].pinned
    assert listing.tokens == chosen.tokens <= budget
    by_words = {f.content: f.id for f in held}
    assert [(f.id, f.standing) for f in listing.rest] == [
        *((f.id, "recalled") for f in chosen.left_out),
        (by_words["Ana does not want to talk about her ex"], "hidden"),
        (by_words["Ana has a dentist appointment on Monday"], "past"),
    ]
    days = {f.content: f.day for f in listing.facts}
    assert days["Ana works as a nurse"] == date(2026, 3, 1)  # its message's local day
    assert days["Ana likes green tea"] == clock.now().astimezone(LISBON).date()  # when it was saved
    assert "Bo keeps bees" not in str(listing)
    lines = listing_lines(listing.facts)
    assert lines[:2] == ["In your profile, which I read every time we talk:", "1. 📌 Ana likes green tea"]
    headings = [line for line in lines if line.endswith(":")]
    assert headings == [
        "In your profile, which I read every time we talk:",
        "Recalled when relevant (no room left in the profile):",
        "Kept, but I don't bring these up unless you ask:",
        "Plans whose date has passed:",
    ]
    assert lines[-4:] == [
        "4. Ana does not want to talk about her ex",
        "",
        "Plans whose date has passed:",
        "5. Ana has a dentist appointment on Monday",
    ]
    async with sessions() as session:
        capped = await read_listing(session, ana, now=clock.now(), zone=LISBON, budget_tokens=budget, limit=1)
    assert len(capped.rest) == 1 and capped.more == 2


async def test_changes_reach_only_the_owners_own_facts(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana, bo = await _seed(sessions, clock)
    async with sessions() as session:
        (bees,) = await FactRepository(session).held(bo)
        tea = next(f for f in await FactRepository(session).held(ana) if "tea" in f.content)
    at = clock.now()
    settings = Settings(_env_file=None, embedder="none")  # type: ignore[call-arg]
    units = FactUnits.from_settings(settings)
    dialect = sessions.kw["bind"].dialect.name
    facts = Facts(
        settings,
        Recall(settings=settings, sessions=sessions, dialect=dialect, embedder=None, units=units),
        units=units,
    )
    assert await set_flag(sessions, ana, bees.id, "hide", at=at) is None
    assert await reword(sessions, ana, bees.id, "Bo keeps wasps", at=at, max_chars=300) is None
    assert await facts.forget_fact(ana, bees.id, reason="x", at=at) is None
    for wrong in ("", "   ", "x" * 301):
        with pytest.raises(FactRejectedError):
            await reword(sessions, ana, tea.id, wrong, at=at, max_chars=300)
    # Hiding a pinned fact unpins it; pinning a hidden one shows it again.
    hidden = await set_flag(sessions, ana, tea.id, "hide", at=at)
    assert hidden is not None and (hidden.pinned, hidden.hidden) == (False, True)
    pinned = await set_flag(sessions, ana, tea.id, "pin", at=at)
    assert pinned is not None and (pinned.pinned, pinned.hidden) == (True, False)
    worded = await reword(sessions, ana, tea.id, "  Ana loves   green tea ", at=at, max_chars=300)
    assert worded is not None and worded.content == "Ana loves green tea"
    assert await facts.forget_fact(ana, tea.id, reason="they said so", at=at) == "Ana loves green tea"
    async with sessions() as session:
        assert [f.content for f in await FactRepository(session).held(bo)] == ["Bo keeps bees"]
        assert "Ana loves green tea" not in [f.content for f in await FactRepository(session).held(ana)]
