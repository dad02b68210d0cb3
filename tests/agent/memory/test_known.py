"""Applying extraction's decisions trusts no id: only the owner's held facts are reinforced or
superseded; copies of a fact that differ only in case, spacing or punctuation are one fact."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.memory.known import Decided, apply_decisions
from bench.clock import FrozenClock
from db.models import UserFact
from db.repositories.dedupe import fact_dedupe_key, normalise_fact
from db.repositories.facts import FactRepository
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases


async def _facts(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> dict[str, UserFact]:
    async with sessions() as session:
        rows = await session.scalars(
            select(UserFact).where(UserFact.user_id == owner_id).order_by(UserFact.id)
        )
        return {f.content: f for f in rows}


async def test_decisions_name_only_the_owners_held_facts(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    bo, _ = await get_or_create_user(sessions, key="cli:bo", now=clock.now(), timezone="UTC")
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await add_facts(
            facts, ana.id, None, ["Ana has a cat", "Ana lives in Lisbon"], clock.now(), source="tool"
        )
        await add_facts(facts, ana.id, None, ["Ana is vegetarian"], clock.now(), source="tool", pinned=True)
        await add_facts(facts, bo.id, None, ["Bo lives in Oslo"], clock.now(), source="tool")
        await add_facts(facts, ana.id, None, ["Ana works at Acme"], clock.now(), source="tool")
    mine = await _facts(sessions, ana.id)
    async with sessions() as session, session.begin():
        await FactRepository(session).invalidate(
            ana.id, [mine["Ana works at Acme"].id], clock.now(), reason="wrong"
        )
    theirs = (await _facts(sessions, bo.id))["Bo lives in Oslo"].id
    at = clock.now() + timedelta(days=1)
    decided = [
        Decided("Ana's cat is called Miso", [5], relation="same", known_id=theirs),  # another owner's
        Decided("Ana has her cat", [6], relation="same", known_id=mine["Ana has a cat"].id),
        Decided("Ana lives in Porto", [7], relation="contradiction", known_id=10**9),  # no such fact
        Decided("Ana eats fish", [8], relation="update", known_id=mine["Ana is vegetarian"].id),  # pinned
        Decided("Ana works at a school", [9], relation="update", known_id=mine["Ana works at Acme"].id),
    ]

    async with sessions() as session, session.begin():
        applied = await apply_decisions(session, ana.id, None, decided, at, source="extraction")

    assert (applied.created, applied.reinforced, applied.superseded, applied.ignored_ids) == (4, 1, 0, 3)
    after = await _facts(sessions, ana.id)
    assert after["Ana has a cat"].reinforced == 2 and "Ana has her cat" not in after
    assert after["Ana lives in Lisbon"].invalidated_at is None  # the contradiction named no fact of hers
    assert after["Ana is vegetarian"].invalidated_at is None  # pinned: tidying asks the person
    assert {
        "Ana's cat is called Miso",
        "Ana lives in Porto",
        "Ana eats fish",
        "Ana works at a school",
    } <= set(after)
    assert (await _facts(sessions, bo.id))["Bo lives in Oslo"].reinforced == 1


async def test_copies_differing_in_case_spacing_or_punctuation_are_one_fact(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    copies = [
        ("Ana's cat, Miso, is grey.", [1]),
        ("ana’s cat  Miso is GREY!", [2]),
        ("Anas cat Miso is grey", [3]),
        ("Ana: Miso — her cat — is grey?", [4]),
    ]
    async with sessions() as session, session.begin():
        created = await FactRepository(session).add_sourced(
            ana.id, None, copies[:1], clock.now(), source="extraction"
        )
    async with sessions() as session, session.begin():
        created += await FactRepository(session).add_sourced(
            ana.id, None, copies[1:], clock.now(), source="extraction"
        )

    facts = await _facts(sessions, ana.id)
    assert created == 2 and len(facts) == 2  # the last one is other words, not other punctuation
    cat = facts["Ana's cat, Miso, is grey."]
    assert (cat.message_ids, cat.reinforced) == ([1, 2, 3], 2)


def test_the_fact_key_keeps_every_scripts_letters_and_drops_only_punctuation() -> None:
    assert normalise_fact("Ela mora em São Paulo!") == "ela mora em são paulo"
    assert normalise_fact("वह हिन्दी बोलती है।") == "वह हिन्दी बोलती है"  # the virama and vowel signs stay
    assert normalise_fact("我住在里斯本。") == normalise_fact("我住在里斯本")
    assert normalise_fact("peut-être") == "peut être" and normalise_fact("ＡＢＣ") == "abc"
    assert fact_dedupe_key("Ana loves 🍕") != fact_dedupe_key("Ana loves")
    assert fact_dedupe_key("Ana is 3.5 m tall") != fact_dedupe_key("Ana is 35 m tall")
