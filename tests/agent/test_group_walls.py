"""The walls between a group and its members' private chats, proved on real turns and real search.

A group's turns run under the group's owner row (agent/account/groups.py) and a member's under
their person row; every request the model receives is recorded and searched for the other side's
marker words, with the recall and memory tools called on them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.turn_notes import words
from agent.search.search import SearchHit
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, write_message
from bench.clock import FrozenClock
from db.models import TranscriptMessage, User
from tests.agent.test_tools import make_service

pytestmark = pytest.mark.both_databases

ANA, BOB = 7, 8
SECRET = "aquamarinesecret"  # Ana tells it in private only
GROUP_WORD = "vermilionpicnic"  # said in the group
BOB_WORD = "bobsbluecake"  # Bob's line in the group
SEARCHES = [
    ("conversation_search", {"query": SECRET}),
    ("conversation_search", {"query": "what did Ana tell you in private?"}),
    ("conversation_search", {"query": GROUP_WORD}),
    ("conversation_search", {"query": BOB_WORD}),
    ("memory_search", {"query": SECRET}),
    ("memory_search", {"query": GROUP_WORD}),
    ("memory_search", {"query": ""}),
]


def said(messages: list[ModelMessage]) -> str:
    """The person's words in the newest request that has them. A change to the conversation's package
    is a user prompt too (`<system>`-tagged, sent just before the words: agent/chat/changes.py), and
    holds that owner's own memory: taken for the words, it would pin one side's request on another."""
    return next(
        text
        for m in reversed(messages)
        if isinstance(m, ModelRequest)
        for p in reversed(m.parts)
        if isinstance(p, UserPromptPart) and not (text := words(p)).startswith("<system>")
    )


def changed(messages: list[ModelMessage]) -> bool:
    """Whether the newest request carries a change to the conversation's package."""
    return any(
        isinstance(p, UserPromptPart) and words(p).startswith("<system>")
        for p in next(m for m in reversed(messages) if isinstance(m, ModelRequest)).parts
    )


class Recorder:
    """Records every request as text; a turn whose prompt starts with "search" calls every tool first."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []  # (the turn's prompt, everything the model was sent)
        self.returns: list[str] = []
        self.changes: list[str] = []  # the prompts of the requests that carried a package change

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = said(messages)
        if changed(messages):
            self.changes.append(prompt)
        # Everything the model was sent except its own tool calls (which carry the queries it chose).
        sent = json.dumps(
            [info.instructions, [[p for p in m.parts if p.part_kind != "tool-call"] for m in messages]],
            default=str,
        )
        self.requests.append((prompt, sent))
        start = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest)
            and any(getattr(p, "part_kind", "") == "user-prompt" for p in m.parts)
        )
        made = sum(1 for m in messages[start:] if isinstance(m, ModelResponse))
        for m in messages[start:]:
            if isinstance(m, ModelRequest):
                self.returns.extend(
                    json.dumps(p.content, default=str) for p in m.parts if p.part_kind == "tool-return"
                )
        if prompt.startswith("search") and made < len(SEARCHES):
            name, args = SEARCHES[made]
            return ModelResponse(parts=[ToolCallPart(name, json.dumps(args))])
        return ModelResponse(parts=[TextPart("noted")])


async def _people_and_group(
    sessions: async_sessionmaker[AsyncSession], now: datetime
) -> tuple[User, User, User]:
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=now, timezone="UTC", name="Ana", telegram_id=ANA
    )
    bob, _ = await get_or_create_user(
        sessions, key=f"telegram:{BOB}", now=now, timezone="UTC", name="Bob", telegram_id=BOB
    )
    group, _ = await group_owner(sessions, chat_id=-100_500, title="Picnic club", now=now, timezone="UTC")
    return ana, bob, group


async def _group_line(
    sessions: async_sessionmaker[AsyncSession], group: User, speaker: int, name: str, text: str, at: datetime
) -> None:
    """A line the bot heard in the group (listening: stored with its speaker, no model call)."""
    async with sessions() as session, session.begin():
        row = await write_message(session, group, role="user", content=text, sent_at=at)
        row.speaker_telegram_id, row.speaker_name = speaker, name


async def _said_by(sessions: async_sessionmaker[AsyncSession], group: User, speaker: int, name: str) -> None:
    """The group turn's stored message gets its speaker, as the group surface stores it."""
    async with sessions() as session, session.begin():
        await session.execute(
            update(TranscriptMessage)
            .where(
                TranscriptMessage.user_id == group.id,
                TranscriptMessage.role == "user",
                TranscriptMessage.speaker_telegram_id.is_(None),
            )
            .values(speaker_telegram_id=speaker, speaker_name=name)
        )


async def _seed(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> tuple[User, User, User]:
    ana, bob, group = await _people_and_group(sessions, clock.now())
    start = clock.now()
    await service.reply(
        Incoming(owner=ana.id, text=f"promise to keep it between us: my code word is {SECRET}", sent_at=start)
    )
    assert service.facts is not None
    await service.facts.add(ana.id, f"Her code word is {SECRET}", conversation_id=None, at=start)
    await service.reply(
        Incoming(
            owner=group.id,
            text=f"let's meet at the {GROUP_WORD} spot on Saturday",
            sent_at=start + timedelta(minutes=1),
        )
    )
    await _said_by(sessions, group, ANA, "Ana")
    await _group_line(
        sessions,
        group,
        BOB,
        "Bob",
        f"I'll bring {BOB_WORD} for the {GROUP_WORD}",
        start + timedelta(minutes=2),
    )
    await service.facts.add(
        group.id, f"The club meets at the {GROUP_WORD} spot", conversation_id=None, at=start
    )
    await service.recall.settle()  # type: ignore[union-attr]
    clock.advance(timedelta(days=1))
    return ana, bob, group


def _shown(hits: list[SearchHit]) -> str:
    """Everything a list of search results would show the model."""
    return json.dumps([asdict(h) for h in hits], default=str)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def test_a_private_secret_never_reaches_a_groups_requests_or_search(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service, recall = make_service(settings, engine, sessions, clock, recorder)
    ana, _, group = await _seed(service, sessions, clock)
    recorder.requests.clear()
    recorder.returns.clear()

    await service.reply(
        Incoming(owner=group.id, text="search: what did Ana tell you in private?", sent_at=clock.now())
    )

    assert len(recorder.requests) == len(SEARCHES) + 1
    assert all(SECRET not in sent for _, sent in recorder.requests)
    assert all(SECRET not in r for r in recorder.returns)
    assert any(GROUP_WORD in r for r in recorder.returns)  # the group's own memory is found
    for query in (SECRET, "what did Ana tell you in private?", "code word"):
        assert SECRET not in _shown(await recall.search(group.id, query, now=clock.now()))
    # The secret is there, in Ana's own search.
    assert any(SECRET in (h.snippet or "") for h in await recall.search(ana.id, SECRET, now=clock.now()))
    await service.close()


async def test_the_groups_words_never_reach_a_members_private_chat(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service, recall = make_service(settings, engine, sessions, clock, recorder)
    ana, bob, _ = await _seed(service, sessions, clock)
    recorder.requests.clear()
    recorder.returns.clear()

    await service.reply(
        Incoming(owner=ana.id, text="search: where do we meet on Saturday?", sent_at=clock.now())
    )
    await service.reply(Incoming(owner=bob.id, text="search: what did I bring?", sent_at=clock.now()))

    for _, sent in recorder.requests:
        assert GROUP_WORD not in sent and BOB_WORD not in sent
    assert all(GROUP_WORD not in r and BOB_WORD not in r for r in recorder.returns)
    assert GROUP_WORD not in _shown(await recall.search(ana.id, GROUP_WORD, now=clock.now()))
    await service.close()


async def test_with_recall_of_own_words_a_member_finds_their_own_group_lines_only(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    settings = Settings(database_url=database_url, model="test", group_recall_own_words=True, _env_file=None)
    recorder = Recorder()
    service, recall = make_service(settings, engine, sessions, clock, recorder)
    ana, bob, group = await _seed(service, sessions, clock)

    hits = [h for h in await recall.search(ana.id, GROUP_WORD, now=clock.now()) if GROUP_WORD in _shown([h])]
    assert [(h.group, h.speaker) for h in hits] == [("Picnic club", "Ana")]
    assert hits[0].message_id is None and BOB_WORD not in _shown(hits)
    # Bob's line holds the same word: only Bob finds it, and nobody finds the bot's answers there.
    bobs = [h for h in await recall.search(bob.id, GROUP_WORD, now=clock.now()) if GROUP_WORD in _shown([h])]
    assert [(h.group, h.speaker) for h in bobs] == [("Picnic club", "Bob")] and BOB_WORD in (
        bobs[0].snippet or ""
    )
    assert BOB_WORD not in _shown(await recall.search(ana.id, BOB_WORD, now=clock.now()))
    # The bot's answers in the group are the group's: Ana's search for them finds only her own chat.
    assert all(h.group is None for h in await recall.search(ana.id, "noted", now=clock.now()))
    # The group's facts and summaries stay in the group; the group itself gets no one's private words.
    assert service.facts is not None
    facts = await service.facts.search(ana.id, GROUP_WORD, limit=10, now=clock.now())
    assert all(GROUP_WORD not in f.content for f in facts)
    assert SECRET not in _shown(await recall.search(group.id, SECRET, now=clock.now()))

    recorder.requests.clear()
    recorder.returns.clear()
    await service.reply(Incoming(owner=ana.id, text="search: where do we meet?", sent_at=clock.now()))
    assert any(GROUP_WORD in r and "Picnic club" in r for r in recorder.returns)
    assert all(BOB_WORD not in sent for _, sent in recorder.requests)
    await service.close()


async def test_interleaved_private_and_group_turns_keep_their_walls(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service, _ = make_service(settings, engine, sessions, clock, recorder)
    ana, bob, group = await _seed(service, sessions, clock)
    assert service.facts is not None
    at = clock.now()
    # One fact each for Ana and the group, taken back after the first round: the turns after it
    # carry a change of their package (as a tier that timed out on a loaded machine and came back does).
    notebook = await service.facts.add(ana.id, "Ana keeps a blue notebook", conversation_id=None, at=at)
    members = await service.facts.add(group.id, "The club has twelve members", conversation_id=None, at=at)
    recorder.requests.clear()

    def round_of(i: int) -> list[Any]:
        return [
            service.reply(
                Incoming(owner=ana.id, text=f"ana private {i}: {SECRET}", sent_at=at + timedelta(seconds=i))
            ),
            service.reply(
                Incoming(owner=group.id, text=f"search group {i}", sent_at=at + timedelta(seconds=i))
            ),
            service.reply(
                Incoming(owner=bob.id, text=f"bob private {i}: search", sent_at=at + timedelta(seconds=i))
            ),
            service.reply(
                Incoming(
                    owner=group.id,
                    text=f"group talk {i}: {GROUP_WORD}",
                    sent_at=at + timedelta(seconds=i, milliseconds=500),
                )
            ),
        ]

    await asyncio.gather(*round_of(0))
    taken_back = at + timedelta(milliseconds=900)
    await service.facts.forget_fact(ana.id, notebook.fact_id, reason="test", at=taken_back)
    await service.facts.forget_fact(group.id, members.fact_id, reason="test", at=taken_back)
    await asyncio.gather(*(turn for i in range(1, 4) for turn in round_of(i)))

    by_side = {"group": 0, "ana": 0, "bob": 0}
    for prompt, sent in recorder.requests:
        # Each failure names the request's prompt: which turn saw what it should not.
        if prompt.startswith(("search group", "group talk")):
            by_side["group"] += 1
            assert SECRET not in sent, prompt
        elif prompt.startswith("ana private"):
            by_side["ana"] += 1
            assert GROUP_WORD not in sent and BOB_WORD not in sent, prompt
        else:
            assert prompt.startswith("bob private"), f"a request of no turn: {prompt!r}"
            by_side["bob"] += 1
            assert SECRET not in sent and GROUP_WORD not in sent and BOB_WORD not in sent, prompt
    assert all(count >= 4 for count in by_side.values())
    # Both package changes reached the model, each in its own side's requests.
    assert any(p.startswith("ana private") for p in recorder.changes), recorder.changes
    assert any(p.startswith(("search group", "group talk")) for p in recorder.changes), recorder.changes
    await service.close()
