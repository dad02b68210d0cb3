"""`python -m bot bench cost`: what the chat model's input costs with the prompt laid out for caching.

The turns run through the real Anthropic SDK against the fake Messages API, which models the
prompt cache from the documented rules (bench/fakes/anthropic_cache.py): every figure is the usage
the API reports, priced with genai-prices at the default chat model.

1. One user with a week of history (profile, yesterday, open topics, the last conversation, the
   persona's thoughts, facts found for every message) in a 30-turn conversation with a tool-using turn
   and a history cut; per turn: input tokens, read from cache, written, uncached, billed units (an
   uncached token is 1, a read 0.1, a 5-minute write 1.25, a 1-hour write 2) and dollars.
2. A day of 100 users, each a 6-turn conversation at their own time of day, sharing the bot-wide
   persona entry.
Targets: from the second turn at least 80% of the input read from cache; billed input at most 0.30
of the uncached figure over the session.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import insert, select

from agent.account.users import get_or_create_user
from agent.context import ContextBuilder, FactLimits, FunctionFacts
from agent.core.models import build_model
from agent.core.prices import estimate_cost
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.common import scratch_database
from bench.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text
from bench.fakes.anthropic_cache import CacheUse
from db.engine import create_engine, session_factory
from db.models import Conversation, ConversationThread, DaySegment, GeneratedPrompt, Thought, User
from db.repositories.facts import FactRepository

NOW = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
ANSWER = (
    "That sounds like a lot, and I can hear how much the garden means to you right now. "
    "When you say the tomatoes finally ripened, was it the ones by the fence or the new bed? "
    "I remember you worried about the rain last week. Tell me how the film went tonight, "
    "and whether your sister liked it as much as you hoped she would."
)
TOOL_TURN = 10
FACTS = (
    "Ana works as a nurse on early shifts at the city hospital",
    "Her sister Maya lives in Porto and visits once a month",
    "She does not want diet advice",
    "She likes slow films and cycling along the river",
    "She plans a job interview on Thursday",
    "She grows tomatoes by the fence",
)
FACT_CATEGORIES = ("identity", "people", "health", "preference", "plan", "other")


def _answer(body: dict[str, Any]) -> Reply:
    """A companion's answer of about a hundred tokens."""
    return Reply.text(f"{ANSWER} ({last_user_text(body)[:24]})")


async def _facts(user_id: int, query: str, limits: FactLimits, now: datetime) -> list[str]:
    words = query.split()[:3]
    return [f"They mentioned {' '.join(words)} before; it matters to them ({i})." for i in range(4)]


async def _seed_week(sessions: Any, user_id: int, *, days: int = 7) -> None:
    """Every tier's source: profile and facts, day summaries, open threads, the last conversation,
    thoughts."""
    async with sessions() as session, session.begin():
        user = await session.get(User, user_id)
        user.profile = {
            "interests": ["gardening", "films", "cycling"],
            "work": "nurse on early shifts",
            "family": "a sister, Maya, in Porto",
            "boundaries": ["no diet advice"],
        }
        session.add_all(
            DaySegment(
                user_id=user_id,
                day=(NOW - timedelta(days=d)).date(),
                timezone="UTC",
                first_message_at=NOW - timedelta(days=d, hours=10),
                last_message_at=NOW - timedelta(days=d, hours=9),
                message_count=24,
                summary=(
                    f"## Summary\nDay -{d}: they talked about the night shift, the tomatoes by the fence, "
                    "a film with Maya and the bike ride along the river; tired but hopeful.\n\n"
                    "## Open loops\n- the job interview\n- call Maya back"
                ),
                key_moments=[f"moment {k} of day -{d}: a small win at work" for k in range(5)],
                messages_since_summary=0,
                summary_due=False,
                status="final",
            )
            for d in range(1, days + 1)
        )
        session.add(
            Conversation(
                user_id=user_id,
                status="processed",
                started_at=NOW - timedelta(hours=31),
                last_message_at=NOW - timedelta(hours=30),
                ended_at=NOW - timedelta(hours=30),
                messages=[],
                message_count=24,
                summary="They were nervous about Thursday's interview and planned to practise with Maya.",
            )
        )
        session.add_all(
            ConversationThread(
                user_id=user_id,
                type=("promise", "question", "follow_up", "topic", "curiosity")[i % 5],
                content=f"open topic {i}: how the interview practice with Maya went",
                status="open",
                dedupe_key=f"t{i}",
                created_at=NOW - timedelta(hours=6 * i + 30),
            )
            for i in range(6)
        )
        session.add_all(
            Thought(
                user_id=user_id,
                content=f"I wonder whether the new bed of tomatoes survived the storm ({i})",
                dedupe_key=f"th{i}",
                created_at=NOW - timedelta(hours=30 + i),
            )
            for i in range(3)
        )
        # What a long-time user has told it: more facts than the profile holds.
        await FactRepository(session).add_sourced(
            user_id,
            None,
            [(f"{text} ({i})", ()) for i in range(20) for text in FACTS],
            NOW - timedelta(days=8),
            source="extraction",
            categories=[category for _ in range(20) for category in FACT_CATEGORIES],
        )


@dataclass(frozen=True)
class TurnCost:
    """One turn's chat requests: tokens and what they are billed."""

    requests: int
    total: int
    read: int
    written_5m: int
    written_1h: int
    uncached: int
    output: int

    @property
    def billed_units(self) -> float:
        """Input tokens weighted by their price relative to an uncached one."""
        return self.uncached + 0.1 * self.read + 1.25 * self.written_5m + 2.0 * self.written_1h


def turn_cost(uses: Sequence[CacheUse], output: int = 0) -> TurnCost:
    """One turn's requests added up (`output`: its output tokens, where they are counted)."""
    return TurnCost(
        len(uses),
        sum(u.total for u in uses),
        sum(u.read for u in uses),
        sum(u.written_5m for u in uses),
        sum(u.written_1h for u in uses),
        sum(u.uncached for u in uses),
        output,
    )


def _split(uses: Sequence[CacheUse], model: str) -> tuple[list[CacheUse], list[CacheUse]]:
    """The chat model's requests, and the others (the summary model compacting the history)."""
    name = model.partition(":")[2] or model
    return [u for u in uses if u.model == name], [u for u in uses if u.model != name]


def _dollars(model: str, cost: TurnCost) -> tuple[Decimal, Decimal]:
    priced = estimate_cost(
        model,
        cost.total,
        cost.output,
        cache_read_tokens=cost.read,
        cache_write_tokens=cost.written_5m + cost.written_1h,
        cache_write_1h_tokens=cost.written_1h,
    )
    return (priced.billed, priced.uncached) if priced is not None else (Decimal(0), Decimal(0))


class _Clock:
    """The fake API's cache clock, following the turns' simulated time."""

    def __init__(self, clock: FrozenClock) -> None:
        self.clock = clock

    def __call__(self) -> float:
        return self.clock.now().timestamp()


async def _conversation(
    url: str, fake: FakeAnthropic, settings: Settings, clock: FrozenClock
) -> tuple[list[TurnCost], list[TurnCost], list[str]]:
    engine = create_engine(url)
    sessions = session_factory(engine)
    model = build_model(settings.model, settings)
    builder = ContextBuilder(settings, facts=FunctionFacts(_facts))
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=model, context_builder=builder
    )
    user, _ = await get_or_create_user(sessions, key="cli:week", now=NOW, timezone="UTC", name="Ana")
    await _seed_week(sessions, user.id)
    costs: list[TurnCost] = []
    others: list[TurnCost] = []
    cuts: list[str] = []
    for turn in range(1, 31):
        at = NOW + timedelta(minutes=2 * turn)
        clock.current = at
        if turn == TOOL_TURN:
            fake.script(Reply.tool_call("memory_search", {"query": "Maya interview"}), _answer)
        before = len(fake.cache.uses)
        result = await service.reply(
            Incoming(owner=user.id, text=f"turn {turn}: so today at work was long, and then", sent_at=at)
        )
        chat, other = _split(fake.cache.uses[before:], settings.model)
        costs.append(turn_cost(chat, len(result.text) // 4 * len(chat)))
        others.append(turn_cost(other, settings.compaction_summary_max_tokens * len(other)))
        cuts.append(await _cut(sessions, result.message_id))
    await service.close()
    await engine.dispose()
    return costs, others, cuts


async def _cut(sessions: Any, message_id: int) -> str:
    """How this turn's history was cut: "compacted" (a new summary), "window" (a cut in steps) or ""."""
    async with sessions() as session:
        row = (
            await session.execute(select(GeneratedPrompt).where(GeneratedPrompt.message_id == message_id))
        ).scalar_one()
    snapshot = row.context_snapshot
    if snapshot["history"]["compaction"]["status"] == "new":
        return "compacted"
    return "window" if any(cut["tier"] == "history" for cut in snapshot["cuts"]) else ""


async def _day(
    url: str, fake: FakeAnthropic, settings: Settings, clock: FrozenClock, users: int
) -> list[TurnCost]:
    engine = create_engine(url)
    sessions = session_factory(engine)
    service = TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=build_model(settings.model, settings),
        context_builder=ContextBuilder(settings, facts=FunctionFacts(_facts)),
    )
    rng = random.Random(7)
    plan: list[tuple[datetime, int, int]] = []
    ids: list[int] = []
    for n in range(users):
        user, _ = await get_or_create_user(sessions, key=f"cli:day{n}", now=NOW, timezone="UTC", name=f"U{n}")
        ids.append(user.id)
        start = NOW + timedelta(minutes=rng.randrange(0, 14 * 60))
        plan += [(start + timedelta(minutes=2 * t), user.id, t) for t in range(6)]
    async with engine.begin() as conn:
        await conn.execute(
            insert(DaySegment),
            [
                {
                    "user_id": uid,
                    "day": (NOW - timedelta(days=1)).date(),
                    "timezone": "UTC",
                    "first_message_at": NOW - timedelta(days=1),
                    "last_message_at": NOW - timedelta(days=1),
                    "message_count": 10,
                    "summary": "## Summary\nThey talked about work, a film and the weekend; content.",
                    "key_moments": [],
                    "messages_since_summary": 0,
                    "summary_due": False,
                    "status": "final",
                }
                for uid in ids
            ],
        )
    costs: list[TurnCost] = []
    for at, user_id, t in sorted(plan):
        clock.current = at
        before = len(fake.cache.uses)
        result = await service.reply(
            Incoming(owner=user_id, text=f"turn {t}: how was your day, and what about the film?", sent_at=at)
        )
        chat, _ = _split(fake.cache.uses[before:], settings.model)
        costs.append(turn_cost(chat, len(result.text) // 4))
    await service.close()
    await engine.dispose()
    return costs


def _share(costs: Sequence[TurnCost]) -> tuple[float, float]:
    total = sum(c.total for c in costs) or 1
    return sum(c.read for c in costs) / total, sum(c.billed_units for c in costs) / total


async def run_cost_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the conversation's turns and the day's totals."""
    clock = FrozenClock(current=NOW)
    fake = FakeAnthropic(clock=_Clock(clock), responder=_answer)
    previous = os.environ.get("ANTHROPIC_BASE_URL")
    # Each turn's request and context lines would bury the figures.
    for name in ("httpx", "httpx2", "agent.context.builder"):
        logging.getLogger(name).setLevel(logging.WARNING)
    with fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        try:
            async with scratch_database("sqlite") as url:
                assert url is not None
                chat = Settings(
                    database_url=url,
                    model=settings.model,
                    anthropic_api_key="bench-key",
                    prompt_cache=settings.prompt_cache,
                    _env_file=None,
                )
                costs, others, cuts = await _conversation(url, fake, chat, clock)
                _print_conversation(chat, costs, others, cuts)
                users = 20 if quick else 100
                day = await _day(url, fake, chat, clock, users)
                _print_day(chat.model, day, users)
        finally:
            if previous is None:
                os.environ.pop("ANTHROPIC_BASE_URL", None)
            else:
                os.environ["ANTHROPIC_BASE_URL"] = previous


def _print_conversation(
    settings: Settings, costs: list[TurnCost], others: list[TurnCost], cuts: list[str]
) -> None:
    model = settings.model
    print(
        f"one user, a week of history, a 30-turn conversation ({model}, PROMPT_CACHE={settings.prompt_cache})"
    )
    print("  chat model's requests only; the history's cuts are compaction's summaries (their cost below)")
    print("  turn  reqs  input   read  write5m  write1h  uncached  read%  billed/uncached", end="")
    print("  $ billed  $ uncached  cut")
    for n, (cost, cut) in enumerate(zip(costs, cuts, strict=True), start=1):
        billed, plain = _dollars(model, cost)
        share = cost.read / cost.total if cost.total else 0.0
        print(
            f"  {n:4}  {cost.requests:4}  {cost.total:5}  {cost.read:5}  {cost.written_5m:7}"
            f"  {cost.written_1h:7}"
            f"  {cost.uncached:8}  {share:5.0%}  {cost.billed_units / cost.total:15.2f}  {billed:8.5f}"
            f"  {plain:10.5f}  {cut}"
        )
    later_share, _ = _share(costs[1:])
    _, billed_ratio = _share(costs)
    billed = sum((_dollars(model, c)[0] for c in costs), Decimal(0))
    plain = sum((_dollars(model, c)[1] for c in costs), Decimal(0))
    print(
        f"  from turn 2: {later_share:.1%} of input read from cache (target >= 80%); "
        f"session billed input {billed_ratio:.2f} of uncached (target <= 0.30)"
    )
    print(f"  dollars per turn: {billed / len(costs):.5f} billed, {plain / len(costs):.5f} without caching")
    compactions = [c for c in others if c.requests]
    spent = sum(_dollars(settings.summary_model, c)[0] for c in compactions)
    print(
        f"  compaction: {sum(c.requests for c in compactions)} summary calls, "
        f"{sum(c.total for c in compactions)} input tokens, ${spent:.5f} ({settings.summary_model})"
    )


def _print_day(model: str, costs: list[TurnCost], users: int) -> None:
    share, ratio = _share(costs)
    billed = sum(_dollars(model, c)[0] for c in costs)
    plain = sum(_dollars(model, c)[1] for c in costs)
    print(f"a day of {users} users, 6 turns each ({len(costs)} turns)")
    print(
        f"  read {share:.1%} of input from cache; billed input {ratio:.2f} of uncached; "
        f"${billed / len(costs):.5f} a turn billed, ${plain / len(costs):.5f} without caching; "
        f"${billed:.3f} for the day (${plain:.3f} uncached)"
    )
