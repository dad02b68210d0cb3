"""`python -m bot bench group`: a busy group chat's day, through the group turn the bot runs.

Fifty members write 1,000 messages between 08:00 and 23:00, a tenth of them addressed to the bot;
the rest it only hears. Every message goes through `TurnService.hear` or `TurnService.group_reply`
(agent/turn/service.py), the Telegram-free entry bot/handlers/groups.py calls, with the group's owner row.

1. With an instant model, on SQLite and on PostgreSQL when it is reachable: the addressed turns'
   overhead late in the day (the last quarter, when the group's session is longest), a heard
   message's store, and a group turn's context tokens: memory, the conversation's history, the turn's
   note and the heard lines that go with the addressed message.
2. Against the fake Anthropic API with its prompt-cache model on the day's clock (as `bench cost`):
   the share of each addressed turn's chat-model input read from cache, in the cache-ordered layout,
   and the input billed against the same requests uncached.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select

from agent.account.groups import group_owner
from agent.context import ContextBuilder, FactLimits, FunctionFacts
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.turn.group_turn import group_prompt
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, Speaker
from bench.clock import FrozenClock
from bench.common import describe, scratch_database
from bench.cost import turn_cost
from bench.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text
from db.engine import create_engine, session_factory
from db.models import GeneratedPrompt, TranscriptMessage
from db.repositories.usage import UsageRepository

START = datetime(2026, 3, 10, 8, 0, tzinfo=UTC)
DAY = timedelta(hours=15)
CHAT_ID = -1001234567890
FIRST = (
    "Ana", "Bob", "Cat", "Dan", "Eva", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kira", "Leo", "Mia",
    "Nils", "Olga", "Pau", "Quin", "Rosa", "Sam", "Tea", "Uma", "Vic", "Wen", "Xavi", "Yara",
)  # fmt: skip
TOPICS = (
    "the allotment's water tank is leaking again",
    "who is bringing the ladder on Saturday",
    "my tomatoes finally turned red by the fence",
    "the film night moved to Thursday",
    "has anyone seen the blue watering can",
    "the bike ride along the river was lovely",
    "we should fix the gate before the storm",
    "Maya's cake for the harvest fair was amazing",
)
QUESTIONS = (
    "what did we decide about the ladder?",
    "any idea how to stop the tank leaking?",
    "can you remind us when the film night is?",
    "what should we plant next to the tomatoes?",
)
ANSWER = "Happy to help! From what you all said, Saturday works, and the ladder is Bob's. Anything else?"


@dataclass(frozen=True)
class Said:
    """One message of the day: when, by which member, what, and whether it speaks to the bot."""

    at: datetime
    member: int
    text: str
    to_bot: bool


def member(n: int) -> Speaker:
    """Member n: a Telegram id and a name (fifty names from twenty-five first names)."""
    return Speaker(10_000 + n, FIRST[n % len(FIRST)] + ("" if n < len(FIRST) else " K."))


def plan_day(messages: int, members: int, *, seed: int = 38) -> list[Said]:
    """The day's messages, 1,000 evenly spread over fifteen hours; every tenth is addressed to the bot."""
    rng = random.Random(seed)
    gap = DAY / 1_000  # a smaller day is the start of the same day, at the same pace
    said: list[Said] = []
    for i in range(messages):
        to_bot = i % 10 == 9
        text = f"Nikita, {rng.choice(QUESTIONS)}" if to_bot else f"{rng.choice(TOPICS)} ({i})"
        said.append(Said(START + gap * i, rng.randrange(members), text, to_bot))
    return said


async def _facts(user_id: int, query: str, limits: FactLimits, now: datetime) -> list[str]:
    words = " ".join(query.split()[-3:])
    return [f"The group talked about {words} before ({i})." for i in range(4)]


def _instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(ANSWER)])


@dataclass(frozen=True)
class Tokens:
    """A group turn's context, in tokens."""

    memory: int
    history: int
    note: int
    heard: int  # the user prompt: the lines heard since the last answer, then the addressed message
    total: int  # everything the chat model reads of it, the persona and tools aside


@dataclass
class GroupDay:
    """What one day measured."""

    addressed_ms: list[float] = field(default_factory=list)  # the late addressed turns
    heard_ms: list[float] = field(default_factory=list)
    tokens: list[Tokens] = field(default_factory=list)  # the late addressed turns
    cache: list[tuple[int, int]] = field(default_factory=list)  # every addressed turn: (read, input)
    billed: list[float] = field(
        default_factory=list
    )  # every addressed turn: input billed, in uncached tokens
    spent: list[int] = field(default_factory=list)  # the group's tokens of the day after each of them
    owner_id: int = 0


async def _tokens(sessions: Any, message_id: int) -> Tokens:
    """The turn's context as its stored prompt snapshot counts it, and the heard lines it carried."""
    async with sessions() as session:
        snapshot = (
            await session.execute(
                select(GeneratedPrompt.context_snapshot).where(GeneratedPrompt.message_id == message_id)
            )
        ).scalar_one()
        message = await session.get(TranscriptMessage, message_id)
        assert message is not None
        prompt = await group_prompt(session, message)
    heard = get_counter().count(prompt)
    layers = snapshot["layers"]
    return Tokens(
        memory=int(layers["memory_tokens"]),
        history=int(snapshot["message_history_tokens"]),
        note=int(layers["note_tokens"]),
        heard=heard,
        total=int(snapshot["total_tokens"]) + heard,
    )


async def run_day(
    url: str,
    settings: Settings,
    model: Model,
    said: Sequence[Said],
    *,
    clock: FrozenClock,
    fake: FakeAnthropic | None = None,
) -> GroupDay:
    """Play the day into a fresh group on `url`; timings and tokens from the last quarter on."""
    engine = create_engine(url)
    sessions = session_factory(engine)
    service = TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=model,
        context_builder=ContextBuilder(settings, facts=FunctionFacts(_facts)),
    )
    owner, _ = await group_owner(
        sessions, chat_id=CHAT_ID, title="Allotment friends", now=START, timezone="UTC"
    )
    day = GroupDay(owner_id=owner.id)
    late = len(said) * 3 // 4
    chat_model = settings.model.partition(":")[2] or settings.model
    try:
        for n, message in enumerate(said):
            clock.current = message.at
            speaker = member(message.member)
            before = len(fake.cache.uses) if fake is not None else 0
            started = time.perf_counter()
            if message.to_bot:
                result = await service.group_reply(
                    Incoming(
                        owner=owner.id,
                        text=message.text,
                        sent_at=message.at,
                        telegram_message_id=n + 1,
                        speaker=speaker,
                        may_change_memory=False,
                    )
                )
            else:
                await service.hear(
                    Incoming(
                        owner=owner.id,
                        text=message.text,
                        sent_at=message.at,
                        telegram_message_id=n + 1,
                        speaker=speaker,
                    )
                )
            elapsed = (time.perf_counter() - started) * 1000
            if not message.to_bot:
                day.heard_ms.append(elapsed)
                continue
            if fake is not None:
                cost = turn_cost([u for u in fake.cache.uses[before:] if u.model == chat_model])
                day.cache.append((cost.read, cost.total))
                day.billed.append(cost.billed_units)
                async with sessions() as session:
                    _, spent = await UsageRepository(session).spent(message.at.date(), owner.id)
                day.spent.append(spent)
            if n >= late:
                day.addressed_ms.append(elapsed)
                day.tokens.append(await _tokens(sessions, result.message_id))
    finally:
        await service.close()
        await engine.dispose()
    return day


def _answer(body: dict[str, Any]) -> Reply:
    return Reply.text(f"{ANSWER} ({last_user_text(body)[-24:]})")


@contextmanager
def _fake_anthropic(clock: FrozenClock) -> Iterator[FakeAnthropic]:
    """The fake Messages API on the day's clock, where the Anthropic SDK sends its requests meanwhile."""
    previous = os.environ.get("ANTHROPIC_BASE_URL")
    with FakeAnthropic(clock=lambda: clock.now().timestamp(), responder=_answer) as fake:
        os.environ["ANTHROPIC_BASE_URL"] = fake.base_url
        try:
            yield fake
        finally:
            if previous is None:
                os.environ.pop("ANTHROPIC_BASE_URL", None)
            else:
                os.environ["ANTHROPIC_BASE_URL"] = previous


async def cached_day(settings: Settings, said: Sequence[Said]) -> GroupDay:
    """The day's addressed turns against the fake Anthropic API's cache model, on SQLite."""
    clock = FrozenClock(current=START)
    with _fake_anthropic(clock) as fake:
        async with scratch_database("sqlite") as url:
            assert url is not None
            chat = Settings(
                database_url=url,
                model=settings.model,
                anthropic_api_key="bench-key",
                prompt_cache=settings.prompt_cache,
                # Every turn answered by the model; where the day crosses the cap is printed instead.
                group_daily_tokens=0,
                _env_file=None,
            )
            return await run_day(url, chat, build_model(chat.model, chat), said, clock=clock, fake=fake)


def instant_settings(url: str) -> Settings:
    """An instant chat model and summary model: only the product's own work is timed."""
    return Settings(database_url=url, model="test", summary_model="test", _env_file=None)


def _print_tokens(tokens: Sequence[Tokens]) -> None:
    def mean(values: Sequence[int]) -> int:
        return round(statistics.fmean(values))

    memory, history = mean([t.memory for t in tokens]), mean([t.history for t in tokens])
    note, heard = mean([t.note for t in tokens]), mean([t.heard for t in tokens])
    print(
        f"  group turn's context, mean of the late turns: {mean([t.total for t in tokens])} tokens: "
        f"memory {memory}, history {history}, note {note}, heard lines with the message {heard}"
    )
    last = tokens[-1]
    print(
        f"  the day's last turn: {last.total} tokens (memory {last.memory}, history {last.history}, "
        f"note {last.note}, heard {last.heard})"
    )


async def run_group_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the day's figures per backend, then the cache share."""
    messages, members = (200, 20) if quick else (1_000, 50)
    said = plan_day(messages, members)
    addressed = sum(s.to_bot for s in said)
    print(f"a group's day: {members} members, {messages} messages, {addressed} addressed to the bot")
    print("instant model; addressed turns and their tokens from the last quarter of the messages")
    # Each turn's context and request lines would bury the figures.
    for name in ("httpx", "httpx2", "agent.context.builder"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for backend in ("sqlite", "postgres"):
        async with scratch_database(backend) as url:
            if url is None:
                print(f"  {backend:8}: PostgreSQL unreachable, skipped")
                continue
            clock = FrozenClock(current=START)
            day = await run_day(url, instant_settings(url), FunctionModel(_instant), said, clock=clock)
            print(f"  {backend:8} addressed turn (late):  {describe(day.addressed_ms)}")
            print(f"  {backend:8} heard message (all day): {describe(day.heard_ms)}", flush=True)
            if backend == "sqlite":
                _print_tokens(day.tokens)
    cached = await cached_day(settings, said)
    shares = read_shares(cached)
    later = cached.cache[1:]
    print(f"prompt cache ({settings.model}, PROMPT_CACHE={settings.prompt_cache}), {len(shares)} turns")
    print(
        f"  chat input read from cache: first turn {shares[0]:.1%}; from the second "
        f"{sum(r for r, _ in later) / max(1, sum(t for _, t in later)):.1%} of "
        f"{sum(t for _, t in later)} tokens (lowest turn {min(shares[1:]):.1%}); billed input "
        f"{sum(cached.billed[1:]) / max(1, sum(t for _, t in later)):.2f} of uncached"
    )
    cap = settings.group_daily_tokens
    crossed = next((n for n, spent in enumerate(cached.spent, 1) if spent >= cap), None) if cap else None
    print(
        f"  the group's model tokens of the day: {cached.spent[-1]:,} (chat and compaction); "
        f"GROUP_DAILY_TOKENS {cap:,} "
        + (f"reached after addressed turn {crossed}" if crossed else "not reached")
    )


def read_shares(day: GroupDay) -> list[float]:
    """Each addressed turn's share of its chat-model input read from cache."""
    return [read / total if total else 0.0 for read, total in day.cache]
