"""The stop button on streamed drafts: through python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import func, select

from agent.core.settings import Settings
from agent.turn.stopped import STOPPED_NOTE
from bench.fakes.telegram_api import FakeTelegram, SentDraft
from bot.app import build_application, running
from bot.delivery.inbox import parse_update
from bot.runtime import Runtime, build_runtime
from bot.web.app import WEBHOOK_PATH
from db.inbox import InboxRepository
from db.models import DraftStop, InboxUpdate, ModelUsage
from tests.bot.conftest import Brain, last_user_text, running_bot, transcript_rows
from tests.bot.delivery_helpers import WEBHOOK_HEADERS, eventually, webhook_client, webhook_settings

ALICE = 42
STORY = [f"word{n} " for n in range(40)]


@dataclass
class Storyteller:
    """A streaming model that writes STORY slowly; it notes when its stream is closed early."""

    pause: float = 0.1
    cut_off: int = 0
    histories: list[list[ModelMessage]] = field(default_factory=list)

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        self.histories.append(list(messages))
        if "short" in last_user_text(messages):
            yield "A short one."
            return
        try:
            for piece in STORY:
                yield piece
                await asyncio.sleep(self.pause)
        except (asyncio.CancelledError, GeneratorExit):
            self.cut_off += 1
            raise


@pytest.fixture
def teller() -> Storyteller:
    return Storyteller()


@pytest.fixture
async def bot_runtime(
    settings_factory: Callable[..., Settings], engine: Any, brain: Brain, teller: Storyteller
) -> AsyncIterator[Runtime]:
    settings = settings_factory(onboarding_enabled=False, stream_interval_seconds=0.1)
    async with running_bot(settings, FunctionModel(brain, stream_function=teller)) as runtime:
        yield runtime


async def a_draft(tg: FakeTelegram, chat_id: int, words: int = 3) -> SentDraft:
    """The first draft of `chat_id` showing at least `words` words."""
    await eventually(lambda: any(len(d.text.split()) >= words for d in tg.drafts if d.chat_id == chat_id))
    return next(d for d in tg.drafts if d.chat_id == chat_id and len(d.text.split()) >= words)


async def chat_calls(runtime: Runtime) -> int:
    async with runtime.sessions() as session:
        return int(await session.scalar(select(ModelUsage.calls).where(ModelUsage.kind == "chat")) or 0)


@pytest.mark.both_databases
async def test_a_stop_mid_stream_ends_the_model_call_and_keeps_what_was_written(
    bot_runtime: Runtime, tg: FakeTelegram, teller: Storyteller
) -> None:
    tg.user_message(ALICE, "tell me a story")
    draft = await a_draft(tg, ALICE)
    assert draft.can_stop and draft.keep_on_stop
    assert tg.stop_generation(ALICE, draft.draft_id) is not None
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert teller.cut_off == 1  # the model's stream was closed, not read to its end
    full = "".join(STORY).strip()
    assert final.text.startswith(draft.text) and len(final.text) < len(full)
    assert (await transcript_rows(bot_runtime))[-1] == ("assistant", "stopped", final.text)
    assert await chat_calls(bot_runtime) == 1  # the stopped call is counted
    # No apology; the next message is answered as usual, and the model reads where it was cut off.
    tg.user_message(ALICE, "a short one then")
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[-1].text == "A short one."
    stopped = teller.histories[-1][-2]
    assert isinstance(stopped, ModelResponse)
    assert stopped.parts == [TextPart(f"{final.text}\n\n{STOPPED_NOTE}")]
    assert await chat_calls(bot_runtime) == 2


async def test_a_stop_after_the_answer_changes_nothing(
    bot_runtime: Runtime, tg: FakeTelegram, teller: Storyteller
) -> None:
    teller.pause = 0.01
    tg.user_message(ALICE, "tell me a story")
    [answer] = await tg.wait_for_messages(1, chat_id=ALICE)
    draft = next(d for d in tg.drafts if d.chat_id == ALICE)
    assert tg.stop_generation(ALICE, draft.draft_id) is not None
    assert tg.stop_generation(ALICE, 999) is None  # no such draft: Telegram shows no button
    await eventually(lambda: tg.pending_updates == 0)
    async with bot_runtime.sessions() as session:
        assert await session.scalar(select(DraftStop.draft_id)) == draft.draft_id
    tg.user_message(ALICE, "a short one")
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert [r.text for r in replies] == [answer.text, "A short one."]
    assert teller.cut_off == 0
    assert [row[:2] for row in await transcript_rows(bot_runtime)] == [
        ("user", "text"),
        ("assistant", "text"),
        ("user", "text"),
        ("assistant", "text"),
    ]
    # /forget's cleanup of the inbox takes the stops of their chat and the rows that brought them.
    await eventually(lambda: _all_done(bot_runtime, 3))
    async with bot_runtime.sessions() as session, session.begin():
        assert await InboxRepository(session).forget_sender(ALICE) == 3
    async with bot_runtime.sessions() as session:
        assert await session.scalar(select(func.count(DraftStop.draft_id))) == 0
        assert await session.scalar(select(func.count(InboxUpdate.id))) == 0


async def _all_done(runtime: Runtime, n: int) -> bool:
    async with runtime.sessions() as session:
        return await InboxRepository(session).counts() == {"done": n}


@pytest.mark.both_databases
async def test_a_stop_reaches_the_turn_on_another_instance(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    database_url: str,
    brain: Brain,
    teller: Storyteller,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("several instances share one PostgreSQL")
    settings = webhook_settings(settings_factory, stream_interval_seconds=0.1)
    model = FunctionModel(brain, stream_function=teller)
    first = await build_runtime(settings, model=model, migrate=False, summary_model=TestModel())
    second = await build_runtime(settings, model=model, migrate=False, summary_model=TestModel())
    try:
        writing, other = build_application(first, webhook=True), build_application(second, webhook=True)
        async with (
            running(writing),
            running(other),
            webhook_client(writing, first) as to_first,
            webhook_client(other, second) as to_second,
        ):
            update = tg.user_message(ALICE, "tell me a story")
            posted = await to_first.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)
            assert posted.status_code == 200
            draft = await a_draft(tg, ALICE)
            stop = tg.stop_generation(ALICE, draft.draft_id)
            # The other instance stores the stop; the one writing finds it in the database.
            posted = await to_second.post(WEBHOOK_PATH, json=stop, headers=WEBHOOK_HEADERS)
            assert posted.status_code == 200
            [final] = await tg.wait_for_messages(1, chat_id=ALICE)
            assert teller.cut_off == 1 and final.text.startswith(draft.text)
            assert len(final.text) < len("".join(STORY).strip())
            assert (await transcript_rows(first))[-1] == ("assistant", "stopped", final.text)
    finally:
        await first.close()
        await second.close()


def test_a_stop_update_is_read_from_its_json() -> None:
    chat = {"id": ALICE, "type": "private", "first_name": "Alice"}
    stop = parse_update({"update_id": 7, "stopped_message_generation": {"chat": chat, "draft_id": 3}})
    assert (stop.update_id, stop.telegram_user_id, stop.chat_id, stop.draft_stop, stop.dead) == (
        7,
        None,
        ALICE,
        3,
        None,
    )
    broken = parse_update({"update_id": 8, "stopped_message_generation": {"chat": chat}})
    assert broken.dead is not None and "draft_id" in broken.dead and broken.payload == {}
