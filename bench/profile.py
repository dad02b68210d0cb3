"""`python -m bot bench profile`: the profile and the facts recalled for a message, for a person with
2,000 facts, on SQLite and on PostgreSQL.

The profile is built as a turn builds it (agent/context/profile.py: the held facts learned by the
conversation's start, read through `FactRepository`, chosen within PROFILE_TOKENS, rendered and checked
against the budget), each build in its own database session, after one build that warms the
process: as a new conversation's first turn builds it (nothing kept of the person), and as its later
turns do (the choice kept while the person's facts stay the same). The facts recalled for a message
are ranked as a turn ranks them (full text; the words of the person's facts kept between turns,
read again when they change). Target: the profile's p95 at
most 30 ms on both databases.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.context.facts import STANDARD
from agent.context.profile import ProfileTier, load_profile_tier
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.memory.profile import ProfileCache
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from bench.common import describe, percentile, scratch_database
from db.engine import create_engine, session_factory
from db.models import User
from db.repositories.facts import FactRepository

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
TARGET_MS = 30.0
_SUBJECTS = ("sister", "colleague", "neighbour", "cat", "garden", "bike", "choir", "novel", "job", "flat")
_THINGS = ("Lisbon", "Porto", "the river", "jazz", "tea", "Sundays", "the market", "chess", "rain", "Rome")
_CATEGORIES = ("identity", "people", "health", "preference", "plan", "other", None)
QUERIES = ("how is my sister doing", "we went to the market on Sunday", "remember my bike?", "hi")


def _facts(count: int, rng: random.Random) -> list[tuple[str, str | None, datetime | None, datetime]]:
    """(content, category, a plan's date, when it was said) for `count` distinct facts."""
    out = []
    for index in range(count):
        subject, thing = rng.choice(_SUBJECTS), rng.choice(_THINGS)
        category = rng.choice(_CATEGORIES)
        until = NOW + timedelta(days=rng.randint(-30, 30)) if category == "plan" else None
        said = NOW - timedelta(days=rng.randint(1, 700), minutes=index)
        out.append(
            (f"Their {subject} and {thing}: detail number {index} of a long life", category, until, said)
        )
    return out


async def _seed(sessions: async_sessionmaker[AsyncSession], facts: int) -> User:
    user, _ = await get_or_create_user(
        sessions, key="bench:profile", now=NOW - timedelta(days=800), timezone="UTC", name="Ana"
    )
    rng = random.Random(5)
    rows = _facts(facts, rng)
    async with sessions() as session, session.begin():
        repository = FactRepository(session)
        for content, category, until, said in rows:
            await repository.add_sourced(
                user.id,
                None,
                [(content, ())],
                said,
                source="extraction",
                categories=[category],
                valid_until=[until],
            )
        held = await repository.held(user.id)
        for fact in rng.sample(list(held), min(40, len(held))):
            await repository.set_flags(
                user.id, fact.id, NOW, pinned=rng.random() < 0.2, hidden=rng.random() < 0.5
            )
        for fact in rng.sample(list(held), min(300, len(held))):
            fact.reinforced = rng.randint(2, 6)
    return user


async def measure_profile(backend: str, *, facts: int, builds: int) -> dict[str, object]:
    """The profile's and recall's build times on one database, and how many facts the profile held."""
    settings = Settings(_env_file=None, embedder="none")
    counter = get_counter()
    async with scratch_database(backend) as url:
        if url is None:
            return {"backend": backend, "skipped": "PostgreSQL unreachable"}
        engine = create_engine(url)
        sessions = session_factory(engine)
        try:
            user = await _seed(sessions, facts)
            profiles = ProfileCache(max_owners=8)

            async def build(anchor: datetime) -> tuple[float, ProfileTier]:
                started = time.perf_counter()
                async with sessions() as session:
                    tier = await load_profile_tier(
                        session,
                        user,
                        anchor=anchor,
                        budget=settings.profile_tokens,
                        counter=counter,
                        profiles=profiles,
                    )
                return (time.perf_counter() - started) * 1000, tier

            times: list[float] = []
            later: list[float] = []
            chosen = left = 0
            for index in range(builds + 1):
                # A new conversation's first turn: nothing held of this person (a new anchor each build).
                anchor = NOW + timedelta(minutes=index)
                ms, tier = await build(anchor)
                if index:  # the first build warms the process (imports, the token counter's cache)
                    times.append(ms)
                chosen, left = len(tier.profile.facts), len(tier.profile.left_out)
                # The conversation's later turns: the same anchor, the choice kept while no fact changed.
                later.append((await build(anchor))[0])
            units = FactUnits.from_settings(settings)
            recall = Recall(
                settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=None, units=units
            )
            served = Facts(settings, recall, units=units)
            recalls: list[float] = []
            for index in range(builds + 1):
                query = QUERIES[index % len(QUERIES)]
                started = time.perf_counter()
                await served.for_message(user.id, query, limits=STANDARD, now=NOW)
                if index:
                    recalls.append((time.perf_counter() - started) * 1000)
        finally:
            await engine.dispose()
    return {
        "backend": backend,
        "profile": times,
        "later": later,
        "recall": recalls,
        "chosen": chosen,
        "left_out": left,
    }


async def run_profile_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the profile's and recall's build times at 2,000 facts on both databases."""
    facts, builds = (500, 20) if quick else (2000, 100)
    for backend in ("sqlite", "postgres"):
        figures = await measure_profile(backend, facts=facts, builds=builds)
        if "skipped" in figures:
            print(f"{backend}: {figures['skipped']}")
            continue
        profile = figures["profile"]
        assert isinstance(profile, list) and isinstance(figures["recall"], list)
        assert isinstance(figures["later"], list)
        verdict = "met" if percentile(profile, 95) <= TARGET_MS else "MISSED"
        print(
            f"{backend:8} {facts} facts, PROFILE_TOKENS {settings.profile_tokens}: "
            f"{figures['chosen']} in the profile, {figures['left_out']} left out for the facts tier"
        )
        print(
            f"{backend:8} profile, a new conversation's first turn  {describe(profile)}"
            f"  (target p95 <= {TARGET_MS:.0f} ms: {verdict})"
        )
        print(f"{backend:8} profile, the conversation's later turns {describe(figures['later'])}")
        print(f"{backend:8} recall for a message (words)      {describe(figures['recall'])}")
