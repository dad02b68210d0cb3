"""The profile and the facts recalled for a message, through real turns without a graph: what a person
said days ago is in the first request of a new conversation, a forget or a correction leaves every place
at once (mid-conversation too, before the person's words), and nobody's facts reach another's prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.context.facts import STANDARD
from agent.core.demo import demo_model
from agent.core.settings import Settings
from agent.history.turn_notes import turn_note, words
from agent.memory.profile import section_of
from agent.memory.service import Facts
from agent.reports.texts import memory_report
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bot.runtime import Runtime, build_runtime
from db.models import GeneratedPrompt, UserFact
from db.repositories.facts import FactRepository
from jobs.registry import run_job

pytestmark = pytest.mark.both_databases


@dataclass
class Sent:
    """What one request carried: the instructions, the turn's note, the parts of its last request."""

    instructions: str
    note: str
    parts: list[object]


@dataclass
class Chat:
    """The chat model: records every request, answers in words, never calls a tool."""

    sent: list[Sent] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        parts = list(last.parts) if isinstance(last, ModelRequest) else []
        self.sent.append(Sent(info.instructions or "", turn_note(last), parts))
        return ModelResponse(parts=[TextPart("hello")])

    def about(self, index: int = -1) -> str:
        """The `<about_them>` block of a request's instructions ('' when it has none)."""
        text = self.sent[index].instructions
        return text.split("<about_them>", 1)[1].split("</about_them>", 1)[0] if "<about_them>" in text else ""


@pytest.fixture
async def runtime(
    database_url: str, engine: AsyncEngine, clock: FrozenClock
) -> AsyncIterator[tuple[Runtime, Chat]]:
    """The bot as the documented deploys run it: no graph, the offline demo writing the facts."""
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        model="test",
        summary_model="demo",
        embedder="none",
        graph_backend="none",
    )
    chat = Chat()
    built = await build_runtime(
        settings,
        clock=clock,
        model=FunctionModel(chat),
        summary_model=demo_model(),
        embedder=None,
        migrate=False,
    )
    yield built, chat
    await built.close()


def _facts(runtime: Runtime) -> Facts:
    assert runtime.facts is not None
    return runtime.facts


async def test_a_job_told_three_days_ago_is_in_the_first_request_of_a_new_conversation(
    runtime: tuple[Runtime, Chat], clock: FrozenClock
) -> None:
    bot, chat = runtime
    user, _ = await get_or_create_user(
        bot.sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana"
    )
    await bot.turns.reply(
        Incoming(owner=user.id, text="I work as a nurse at the city hospital.", sent_at=clock.now())
    )
    clock.advance(timedelta(minutes=20))
    assert (await run_job("close-idle-conversations", bot.jobs))["closed"] == 1
    assert (await run_job("postprocess", bot.jobs))["processed"] == 1
    async with bot.sessions() as session:
        (fact,) = await FactRepository(session).held(user.id)
    assert (fact.content, fact.category) == ("The user works as a nurse at the city hospital.", None)
    assert section_of(fact) == "identity"  # written without a category, placed by its words

    clock.advance(timedelta(days=3))
    chat.sent.clear()
    await bot.turns.reply(Incoming(owner=user.id, text="Good morning!", sent_at=clock.now()))

    # One request, no tool call: the job is in the profile of the very first request.
    assert len(chat.sent) == 1
    assert (
        "Name to use: Ana" in chat.about()
        and "- The user works as a nurse at the city hospital." in chat.about()
    )
    assert chat.about().index("Name to use") < chat.about().index("nurse")
    async with bot.sessions() as session:
        snapshot = (
            (
                await session.execute(
                    select(GeneratedPrompt.context_snapshot).order_by(GeneratedPrompt.id.desc())
                )
            )
            .scalars()
            .first()
        )
    assert snapshot is not None
    assert snapshot["tiers"]["profile"]["facts"] == [fact.id]
    assert snapshot["tiers"]["profile"]["left_out_count"] == 0


async def test_what_does_not_fit_the_profile_is_listed_and_recalled_when_relevant(
    database_url: str, engine: AsyncEngine, clock: FrozenClock
) -> None:
    settings = Settings(
        _env_file=None, database_url=database_url, model="test", embedder="none", profile_tokens=55
    )
    chat = Chat()
    bot = await build_runtime(settings, clock=clock, model=FunctionModel(chat), embedder=None, migrate=False)
    try:
        user, _ = await get_or_create_user(bot.sessions, key="cli:ana", now=clock.now(), timezone="UTC")
        facts = _facts(bot)
        said = [
            "Ana lives in Lisbon",
            "Ana's sister Ines is a marine biologist who lives in the Azores with her two children",
            "Ana plays the cello on Sundays with an amateur orchestra in the old church by the river",
        ]
        for text in said:
            await facts.add(user.id, text, conversation_id=None, at=clock.now())
        clock.advance(timedelta(days=1))
        await bot.turns.reply(
            Incoming(owner=user.id, text="I practised the cello for an hour today", sent_at=clock.now())
        )

        async with bot.sessions() as session:
            snapshot = await session.scalar(select(GeneratedPrompt.context_snapshot))
            cello = await FactRepository(session).by_content(user.id, said[2])
        assert snapshot is not None and cello is not None
        profile = snapshot["tiers"]["profile"]
        assert profile["left_out_count"] >= 1 and cello.id in profile["left_out"]
        assert len(profile["facts"]) + profile["left_out_count"] == 3
        # Who she is comes first; the fact left out is recalled for the message that names it, and
        # nothing the profile holds is repeated in the note.
        assert "Ana lives in Lisbon" in chat.about()
        assert "cello" not in chat.about() and said[2] in chat.sent[-1].note
        assert "Lisbon" not in chat.sent[-1].note
    finally:
        await bot.close()


async def test_a_forget_and_a_correction_leave_every_place_at_once(
    runtime: tuple[Runtime, Chat], clock: FrozenClock
) -> None:
    bot, chat = runtime
    user, _ = await get_or_create_user(
        bot.sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana"
    )
    facts = _facts(bot)
    for text in ("Ana lives in Lisbon", "Ana has a cat named Miso", "Ana plays the cello"):
        await facts.add(user.id, text, conversation_id=None, at=clock.now())
    clock.advance(timedelta(days=1))
    await bot.turns.reply(Incoming(owner=user.id, text="hello", sent_at=clock.now()))
    assert "Miso" in chat.about() and "Lisbon" in chat.about()

    # Mid-session: /memory's button forgets the cat, the tool corrects the city.
    async with bot.sessions() as session:
        miso = await FactRepository(session).by_content(user.id, "Ana has a cat named Miso")
    assert miso is not None
    clock.advance(timedelta(minutes=1))
    assert await facts.forget_fact(user.id, miso.id, reason="pressed forget", at=clock.now()) == miso.content
    gone, _ = await facts.correct(
        user.id, "lives in Lisbon", "Ana lives in Porto", conversation_id=None, at=clock.now()
    )
    assert gone == ["Ana lives in Lisbon"]
    clock.advance(timedelta(minutes=1))
    await bot.turns.reply(
        Incoming(owner=user.id, text="what do you know about my cat and my city?", sent_at=clock.now())
    )

    # The profile: delivered once as a change (a `<system>` entry), ahead of the person's words.
    texts = [words(p) for p in chat.sent[-1].parts if isinstance(p, UserPromptPart)]
    changes = [i for i, text in enumerate(texts) if text.startswith("<system>") and "<about_them>" in text]
    assert len(changes) == 1 and texts[-1] == "what do you know about my cat and my city?"
    assert changes[0] < len(texts) - 1
    changed = texts[changes[0]]
    assert "Miso" not in changed and "Lisbon" not in changed and "Ana plays the cello" in changed
    # Recall, memory_search, /memory and its list: the same one list, changed everywhere.
    now = clock.now()
    recalled = await facts.for_message(user.id, "cat Miso Lisbon Porto", limits=STANDARD, now=now)
    assert not any("Miso" in line or "Lisbon" in line for line in recalled)
    assert any("Porto" in line for line in recalled)  # learned after the session began: recalled
    assert [h.content for h in await facts.search(user.id, "cat Miso", limit=5, now=now)] == []
    assert [h.content for h in await facts.search(user.id, "where Ana lives", limit=5, now=now)][:1] == [
        "Ana lives in Porto"
    ]
    report = await memory_report(bot.sessions, user.id, now)
    assert "Miso" not in report and "Lisbon" not in report and "Ana lives in Porto" in report
    async with bot.sessions() as session:
        listed = [f.content for f in await FactRepository(session).held(user.id, newest_first=True, limit=10)]
        superseded = await session.scalar(
            select(UserFact.superseded_by).where(UserFact.content == "Ana lives in Lisbon")
        )
    assert listed == ["Ana lives in Porto", "Ana plays the cello"]
    assert superseded is not None
    # A new conversation's profile is the list as it is now.
    clock.advance(timedelta(days=1))
    await bot.turns.reply(Incoming(owner=user.id, text="morning", sent_at=clock.now()))
    assert "Ana lives in Porto" in chat.about() and "Miso" not in chat.about()


async def test_a_hidden_fact_is_found_when_asked_and_never_brought_up(
    runtime: tuple[Runtime, Chat], clock: FrozenClock
) -> None:
    bot, chat = runtime
    user, _ = await get_or_create_user(bot.sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    facts = _facts(bot)
    added = await facts.add(user.id, "Ana's father died last spring", conversation_id=None, at=clock.now())
    async with bot.sessions() as session, session.begin():
        await FactRepository(session).set_flags(user.id, added.fact_id, clock.now(), hidden=True)
    clock.advance(timedelta(days=1))
    await bot.turns.reply(Incoming(owner=user.id, text="my father used to love spring", sent_at=clock.now()))

    assert "father" not in chat.about() and "father died" not in chat.sent[-1].note
    found = await facts.search(user.id, "father", limit=5, now=clock.now())
    assert [h.content for h in found] == ["Ana's father died last spring"]


async def test_nobody_elses_facts_reach_a_profile_or_recall(
    runtime: tuple[Runtime, Chat], clock: FrozenClock, sessions: async_sessionmaker[AsyncSession]
) -> None:
    bot, chat = runtime
    ana, _ = await get_or_create_user(
        bot.sessions, key="telegram:7", now=clock.now(), timezone="UTC", telegram_id=7
    )
    bea, _ = await get_or_create_user(
        bot.sessions, key="telegram:8", now=clock.now(), timezone="UTC", telegram_id=8
    )
    group, _ = await group_owner(
        bot.sessions, chat_id=-100_7, title="Picnic club", now=clock.now(), timezone="UTC"
    )
    facts = _facts(bot)
    own = {
        ana.id: "Ana's code word is aquamarine",
        bea.id: "Bea works at the zoo",
        group.id: "The club meets at the vermilion spot",
    }
    for owner, text in own.items():
        await facts.add(owner, text, conversation_id=None, at=clock.now())
    clock.advance(timedelta(days=1))
    everything = "aquamarine code word, the zoo, the vermilion spot"
    for owner, text in own.items():
        chat.sent.clear()
        await bot.turns.reply(Incoming(owner=owner, text=everything, sent_at=clock.now()))
        seen = chat.sent[-1].instructions + chat.sent[-1].note
        assert text in chat.about()
        assert [t for t in own.values() if t != text and t in seen] == []
        recalled = await facts.for_message(owner, everything, limits=STANDARD, now=clock.now())
        assert [t for t in own.values() if t != text and any(t in line for line in recalled)] == []


async def test_forget_drops_the_profile_this_process_kept(
    runtime: tuple[Runtime, Chat], clock: FrozenClock
) -> None:
    bot, chat = runtime
    user, _ = await get_or_create_user(bot.sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    await _facts(bot).add(user.id, "Ana lives in Lisbon", conversation_id=None, at=clock.now())
    clock.advance(timedelta(days=1))
    await bot.turns.reply(Incoming(owner=user.id, text="hello", sent_at=clock.now()))
    assert "Ana lives in Lisbon" in chat.about(), chat.sent
    assert len(bot.turns.context_builder.profiles) == 1

    await bot.forget(user.id)
    assert len(bot.turns.context_builder.profiles) == 0
