"""Group chats through the real python-telegram-bot against the fake Bot API: the bot answers when
addressed (mention, reply, its name) and otherwise listens, remembers who said what, answers in the
message's topic, says hello when added, goes quiet when removed, and keeps a group's memory when it
becomes a supergroup."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram, SentMessage
from bot.runtime import Runtime
from db.models import TranscriptMessage, User
from tests.bot.conftest import Brain, last_user_text, running_bot

pytestmark = pytest.mark.both_databases

GROUP = -4001
SUPERGROUP = -1001234567890
ANA, BOB, CAT = 11, 12, 13


async def until[T](probe: Callable[[], Awaitable[T | None]], timeout: float = 10.0) -> T:  # noqa: ASYNC109
    """Poll `probe` until it returns something."""
    deadline = time.monotonic() + timeout
    while (found := await probe()) is None:
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
    return found


async def group_row(runtime: Runtime, chat_id: int) -> User | None:
    async with runtime.sessions() as session:
        return await session.scalar(select(User).where(User.chat_id == chat_id))


async def group_lines(runtime: Runtime, chat_id: int) -> list[tuple[str, str | None, int | None, str]]:
    """(role, speaker name, speaker id, content) of the group's transcript, oldest first."""
    group = await group_row(runtime, chat_id)
    assert group is not None
    async with runtime.sessions() as session:
        rows = await session.execute(
            select(
                TranscriptMessage.role,
                TranscriptMessage.speaker_name,
                TranscriptMessage.speaker_telegram_id,
                TranscriptMessage.content,
            )
            .where(TranscriptMessage.user_id == group.id)
            .order_by(TranscriptMessage.id)
        )
        return [(r, n, i, c) for r, n, i, c in rows]


def reply_target(sent: SentMessage) -> int:
    """The message id an answer replies to (reply_parameters as the wire carries it)."""
    return int(sent.params["reply_parameters"]["message_id"])


async def test_answers_a_mention_a_reply_and_its_name_and_listens_to_the_rest(
    tg: FakeTelegram, brain: Brain, runtime: Runtime, app: Any
) -> None:
    tg.group_message(GROUP, ANA, "I planted tomatoes in the garden", first_name="Ana")
    tg.group_message(GROUP, BOB, "nice, mine died", first_name="Bob")
    asked = tg.mention(GROUP, CAT, "what do you think?", first_name="Cat")
    first = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
    assert reply_target(first) == asked["message"]["message_id"]
    assert brain.chat_calls[-1].splitlines() == [
        "Ana: I planted tomatoes in the garden",
        "Bob: nice, mine died",
        "Cat (to you): @nikita_test_bot what do you think?",
    ]

    tg.group_message(GROUP, ANA, "thanks!", first_name="Ana", reply_to=first.message_id)
    await tg.wait_for_messages(2, chat_id=GROUP)
    # Only what came after the last answer goes with the next addressed message.
    assert brain.chat_calls[-1] == "Ana (to you): thanks!"

    tg.group_message(GROUP, BOB, "the nikitas in my garden are blooming", first_name="Bob")
    tg.group_message(GROUP, CAT, "replying to Ana", first_name="Cat", reply_to=asked["message"]["message_id"])
    tg.group_message(GROUP, BOB, "NIKITA, any tips?", first_name="Bob")
    await tg.wait_for_messages(3, chat_id=GROUP)
    assert brain.chat_calls[-1].splitlines() == [
        "Bob: the nikitas in my garden are blooming",
        "Cat: replying to Ana",
        "Bob (to you): NIKITA, any tips?",
    ]
    assert len(brain.chat_calls) == 3
    lines = await group_lines(runtime, GROUP)
    users = [(name, who, text) for role, name, who, text in lines if role == "user"]
    # Every message once, with its speaker; the addressed ones too, as they were written.
    assert users == [
        ("Ana", ANA, "I planted tomatoes in the garden"),
        ("Bob", BOB, "nice, mine died"),
        ("Cat", CAT, "@nikita_test_bot what do you think?"),
        ("Ana", ANA, "thanks!"),
        ("Bob", BOB, "the nikitas in my garden are blooming"),
        ("Cat", CAT, "replying to Ana"),
        ("Bob", BOB, "NIKITA, any tips?"),
    ]
    assert [role for role, *_ in lines].count("assistant") == 3
    # Nobody became a person of the bot by talking in the group.
    async with runtime.sessions() as session:
        kinds = (await session.execute(select(User.kind))).scalars().all()
    assert kinds == ["group"]
    assert not tg.calls_to("sendMessageDraft")  # drafts are private-only


def searching_model(calls: list[str]) -> FunctionModel:
    """A chat model that searches the conversation for "what did X say about Y" and reads out the hit."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if returned:
            content = returned[-1].content
            results = content.get("results", []) if isinstance(content, dict) else []
            hits = [r for r in results if r.get("kind") == "message"]
            said = "; ".join(f"{h['speaker']} said {h['snippet']}" for h in hits) or json.dumps(content)
            return ModelResponse(parts=[TextPart(said)])
        text = last_user_text(messages)
        calls.append(text)
        if "about " in text:
            topic = text.rsplit("about ", 1)[1].strip("?! ")
            return ModelResponse(parts=[ToolCallPart("conversation_search", {"query": topic})])
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(answer)


async def test_remembers_who_said_what_through_search_and_after_becoming_a_supergroup(
    tg: FakeTelegram, settings: Settings, engine: AsyncEngine
) -> None:
    calls: list[str] = []
    two_hours_ago = int(time.time()) - 7200
    async with running_bot(settings, searching_model(calls)) as runtime:
        tg.group_message(GROUP, ANA, "my tomatoes got blight", first_name="Ana", date=two_hours_ago)
        tg.group_message(GROUP, BOB, "my cat is called Miso", first_name="Bob", date=two_hours_ago + 5)
        tg.mention(GROUP, CAT, "what did Ana say about tomatoes?", first_name="Cat")
        first = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
        # A new conversation (two hours later): the earlier lines are not in the prompt, search finds them.
        assert calls == ["Cat (to you): @nikita_test_bot what did Ana say about tomatoes?"]
        assert "Ana said" in first.text and "blight" in first.text

        tg.migrate(GROUP, SUPERGROUP, user_id=ANA)
        moved = await until(lambda: group_row(runtime, SUPERGROUP))
        # The supergroup's message ids start again; its first messages are not taken for old ones.
        tg.mention(SUPERGROUP, ANA, "what did Bob say about cat?", first_name="Ana")
        after = (await tg.wait_for_messages(1, chat_id=SUPERGROUP))[0]
        assert "Bob said" in after.text and "Miso" in after.text
        assert await group_row(runtime, GROUP) is None
        assert moved.key == f"telegram-chat:{SUPERGROUP}"


async def test_an_answer_in_a_topic_goes_to_that_topic(tg: FakeTelegram, brain: Brain, app: Any) -> None:
    asked = tg.mention(SUPERGROUP, ANA, "hello from the topic", first_name="Ana", thread_id=7)
    sent = (await tg.wait_for_messages(1, chat_id=SUPERGROUP))[0]
    assert sent.params["message_thread_id"] == 7
    assert reply_target(sent) == asked["message"]["message_id"]
    # A topic's messages reply to the topic's first message: that alone does not address the bot.
    tg.group_message(SUPERGROUP, BOB, "just chatting here", first_name="Bob", thread_id=7)
    tg.mention(SUPERGROUP, ANA, "and again", first_name="Ana", thread_id=7)
    await tg.wait_for_messages(2, chat_id=SUPERGROUP)
    assert brain.chat_calls[-1].splitlines() == [
        "Bob: just chatting here",
        "Ana (to you): @nikita_test_bot and again",
    ]


async def test_added_says_hello_and_removed_goes_quiet(
    tg: FakeTelegram, brain: Brain, runtime: Runtime, app: Any
) -> None:
    tg.my_chat_member(GROUP, ANA, old="left", new="member")
    hello = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
    assert "mention me (@nikita_test_bot)" in hello.text and "private chat" in hello.text
    assert "my_chat_member" in tg.calls_to("getUpdates")[-1].params["allowed_updates"]
    group = await group_row(runtime, GROUP)
    assert group is not None and group.kind == "group" and group.unreachable_at is None

    async def marked() -> User | None:
        row = await group_row(runtime, GROUP)
        return row if row is not None and row.unreachable_at is not None else None

    tg.my_chat_member(GROUP, ANA, old="member", new="kicked")
    await until(marked)
    tg.group_message(GROUP, BOB, "is it gone?", first_name="Bob")
    await asyncio.sleep(0.3)
    assert len(tg.messages_to(GROUP)) == 1


async def test_with_groups_off_it_says_so_and_leaves(
    tg: FakeTelegram, settings_factory: Callable[..., Settings], engine: AsyncEngine
) -> None:
    settings = settings_factory(groups_enabled=False)
    async with running_bot(settings, FunctionModel(Brain())):
        tg.my_chat_member(GROUP, ANA, old="left", new="member")
        note = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
        await tg.wait_for_calls("leaveChat")
    assert "only talk in private chats" in note.text
    assert tg.left_chats == [GROUP]


async def test_group_commands(tg: FakeTelegram, brain: Brain, runtime: Runtime, app: Any) -> None:
    tg.group_command(GROUP, BOB, "/timezone Europe/Lisbon", first_name="Bob")
    refused = (await tg.wait_for_messages(1, chat_id=GROUP))[-1]
    assert "Only this group's admins" in refused.text
    tg.make_admin(GROUP, ANA)
    tg.group_command(GROUP, ANA, "/timezone@nikita_test_bot Europe/Lisbon", first_name="Ana")
    changed = (await tg.wait_for_messages(2, chat_id=GROUP))[-1]
    assert changed.text == "Got it: this group's time zone is now Europe/Lisbon."
    group = await group_row(runtime, GROUP)
    assert group is not None and group.timezone == "Europe/Lisbon"
    tg.group_command(GROUP, BOB, "/memory", first_name="Bob")
    memory = (await tg.wait_for_messages(3, chat_id=GROUP))[-1]
    assert memory.text.startswith("Here's what I remember of this group.")
    tg.group_command(GROUP, BOB, "/export", first_name="Bob")
    private = (await tg.wait_for_messages(4, chat_id=GROUP))[-1]
    assert "private chat" in private.text
    tg.group_command(GROUP, BOB, "/help@nikita_test_bot", first_name="Bob")
    helped = (await tg.wait_for_messages(5, chat_id=GROUP))[-1]
    assert "mention you" not in helped.text and "reply to one of my messages" in helped.text
    assert not brain.chat_calls  # no command reached the model


async def test_a_streamed_answer_is_one_message_sent_then_edited_in_its_topic(
    tg: FakeTelegram, settings: Settings, engine: AsyncEngine
) -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Hello "
        await asyncio.sleep(0.5)
        yield "everyone, nice to meet you"

    model = FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("unused")]), stream_function=stream)
    async with running_bot(settings, model):
        asked = tg.mention(SUPERGROUP, ANA, "say hi", first_name="Ana", thread_id=3)
        preview = (await tg.wait_for_messages(1, chat_id=SUPERGROUP))[0]
        await tg.wait_for_calls("editMessageText")
    assert preview.params["message_thread_id"] == 3
    assert reply_target(preview) == asked["message"]["message_id"]
    # The preview became the answer: one message in the chat, no drafts (they are private-only).
    assert tg.chat_view(SUPERGROUP) == ["Hello everyone, nice to meet you"]
    assert len(tg.messages_to(SUPERGROUP)) == 1
    assert not tg.calls_to("sendMessageDraft")
