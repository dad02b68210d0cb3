"""A call stored by another instance while a Telegram turn of the same user runs: nothing lost.

The Telegram turn holds only its inbox lease, which a voice call does not take: the two writers
meet in storage, and storage must keep both.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.messages import load_history
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.call_turn import SpokenTurn
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from agent.voice.calls import EndedCall
from agent.voice.store import VoiceStore
from db.engine import create_engine, session_factory
from db.models import Conversation, TranscriptMessage

pytestmark = pytest.mark.both_databases

SENT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def test_a_call_stored_elsewhere_mid_turn_keeps_the_turn_and_the_call(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], database_url: str
) -> None:
    thinking, answer = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        thinking.set()
        await answer.wait()
        return ModelResponse(parts=[TextPart("echo: typed")])

    settings = Settings(database_url=database_url, model="test", _env_file=None)  # type: ignore[call-arg]
    turns = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(slow))
    user, _ = await get_or_create_user(sessions, key="telegram:5", now=SENT, timezone="UTC")
    # The other instance: its own engine and pool, its own queue.
    other = create_engine(database_url)
    other_sessions = session_factory(other)
    other_recall = Recall(
        settings=settings, sessions=session_factory(other), dialect=other.dialect.name, embedder=None
    )
    other_facts = Facts.over(settings, other_recall)
    other_turns = TurnService(
        settings=settings, engine=other, sessions=other_sessions, recall=other_recall, facts=other_facts
    )
    voice = VoiceStore(sessions=other_sessions, facts=other_facts, turns=other_turns)
    call_start = SENT + timedelta(seconds=5)
    said = ("Hi!", "I called instead", "Nice.")
    call = EndedCall(
        call_id="conv_mid",
        started_at=call_start,
        ended_at=call_start + timedelta(minutes=1),
        turns=tuple(
            SpokenTurn("assistant" if i % 2 == 0 else "user", t, call_start + timedelta(seconds=10 * i))
            for i, t in enumerate(said)
        ),
        token="token",
        token_id="session",
    )
    try:
        turn = asyncio.create_task(
            turns.reply(Incoming(owner=user.id, text="typed", sent_at=SENT, telegram_message_id=1))
        )
        await asyncio.wait_for(thinking.wait(), 30)
        stored_call = await voice.store_call(user.id, call)
        answer.set()
        result = await turn
        await turns.close()
        await other_turns.close()
    finally:
        await other.dispose()

    assert stored_call is not None and not stored_call.duplicate
    # The call ended the text conversation it interrupted; the turn's answer still joined that conversation.
    assert stored_call.closed_text_conversation_id == result.conversation_id
    async with sessions() as session:
        text = await session.get(Conversation, result.conversation_id)
        rows = (
            await session.execute(
                select(
                    TranscriptMessage.conversation_id, TranscriptMessage.role, TranscriptMessage.content
                ).order_by(TranscriptMessage.id)
            )
        ).all()
    assert text is not None
    assert text.message_count == 2
    history = load_history(text.messages)
    assert [p.content for m in history for p in m.parts if isinstance(p, TextPart)] == ["echo: typed"]
    by_conversation = {(c, r, t) for c, r, t in rows}
    assert (result.conversation_id, "user", "typed") in by_conversation
    assert (result.conversation_id, "assistant", "echo: typed") in by_conversation
    call_rows = [t for c, _, t in rows if c == stored_call.conversation_id]
    assert call_rows == list(said)
