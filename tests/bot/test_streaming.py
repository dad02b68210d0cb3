"""Streamed replies: drafts grow while the model writes, the final message is the stored answer."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from sqlalchemy import select

from agent.core.settings import Settings
from agent.turn.run import FAULT_APOLOGY
from bench.fakes.telegram_api import FakeTelegram
from bot.runtime import Runtime
from db.models import Conversation
from tests.bot.conftest import Brain, last_user_text, running_bot, transcript_rows

ALICE = 42
PIECES = ["Here is ", "**the plan**", ":\n\n", "- first\n", "- second 😀"]
FINAL = "Here is the plan:\n\n⦁ first\n⦁ second 😀"
SEARCHING = "Looking through our conversations for “plan”…"


@dataclass
class Writer:
    """A streaming model: searches first when asked to, then writes PIECES slowly; can fail midway."""

    fail_after: int | None = None
    pause: float = 0.15
    seen: list[str] = field(default_factory=list)

    async def __call__(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        text = last_user_text(messages)
        self.seen.append(text)
        returned = isinstance(messages[-1], ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in messages[-1].parts
        )
        if "search" in text and not returned:
            yield {0: DeltaToolCall(name="conversation_search", json_args='{"query": "plan"}')}
            return
        for n, piece in enumerate(PIECES):
            if self.fail_after is not None and n == self.fail_after:
                raise RuntimeError("the model's connection dropped mid-stream")
            yield piece
            await asyncio.sleep(self.pause)


@pytest.fixture
def writer() -> Writer:
    return Writer()


@pytest.fixture
async def bot_runtime(
    settings_factory: Callable[..., Settings], engine: Any, brain: Brain, writer: Writer, request: Any
) -> AsyncIterator[Runtime]:
    overrides = getattr(request, "param", {})
    settings = settings_factory(onboarding_enabled=False, stream_interval_seconds=0.1, **overrides)
    async with running_bot(settings, FunctionModel(brain, stream_function=writer)) as runtime:
        yield runtime


async def test_the_draft_grows_then_the_formatted_answer_arrives(
    bot_runtime: Runtime, tg: FakeTelegram
) -> None:
    tg.user_message(ALICE, "what's the plan?")
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    drafts = [d.text for d in tg.drafts if d.chat_id == ALICE]
    assert len(drafts) >= 3
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(drafts))
    assert "**" not in "".join(drafts)  # drafts are formatted like the final message
    assert final.text == "Here is the plan:\n\n⦁ first\n⦁ second 😀"
    assert any(e["type"] == "bold" for e in final.params["entities"])
    assert final.at >= tg.drafts[-1].at  # the message follows its last preview
    # The stored answer is the model's final text, nothing of the previews.
    assert (await transcript_rows(bot_runtime))[-1] == ("assistant", "text", "".join(PIECES))


async def test_a_tool_call_shows_what_it_does_as_a_thinking_block(
    bot_runtime: Runtime, tg: FakeTelegram
) -> None:
    tg.user_message(ALICE, "search for our plan")
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    first = tg.drafts[0]
    assert first.rich == {"html": f"<tg-thinking>{SEARCHING}</tg-thinking>"} and first.can_stop
    assert first.text == SEARCHING
    assert tg.drafts[-1].rich is None and tg.drafts[-1].text.startswith("Here is the plan")
    assert final.text == FINAL  # the activity is never part of the answer


async def test_without_rich_drafts_the_activity_is_plain_draft_text(
    bot_runtime: Runtime, tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.delivery.streaming")
    tg.rich_drafts_refused = True
    tg.user_message(ALICE, "search for our plan")
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert len(tg.calls_to("sendRichMessageDraft")) == 1
    assert tg.drafts[0].rich is None and tg.drafts[0].text == SEARCHING
    assert final.text == FINAL
    assert [r.message for r in caplog.records].count("rich drafts refused; tool activity shown as text") == 1


async def test_a_failure_mid_stream_ends_with_the_apology_and_a_valid_history(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.fail_after = 2
    tg.user_message(ALICE, "what's the plan?")
    [apology] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert apology.text == FAULT_APOLOGY
    assert any(d.text.startswith("Here is") for d in tg.drafts)  # it was streaming when it broke
    writer.fail_after = None
    tg.user_message(ALICE, "try again?")
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[-1].text.startswith("Here is the plan")
    stored = await transcript_rows(bot_runtime)
    assert [row[:2] for row in stored] == [
        ("user", "text"),
        ("assistant", "apology"),
        ("user", "text"),
        ("assistant", "text"),
    ]
    async with bot_runtime.sessions() as session:
        conversation = await session.scalar(select(Conversation))
        assert conversation is not None and len(conversation.messages) == 4  # request/response pairs


@pytest.mark.parametrize("bot_runtime", [{"stream_replies": False}], indirect=True)
async def test_streaming_can_be_turned_off(bot_runtime: Runtime, tg: FakeTelegram, brain: Brain) -> None:
    tg.user_message(ALICE, "hello")
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert reply.text == "echo: hello" and tg.drafts == []


async def test_drafts_refused_fall_back_to_one_message_edited_into_the_answer(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.6  # 3 s of writing: the preview, then edits at most every second
    tg.fail_next("sendMessageDraft", description="Bad Request: method not available")
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FINAL])
    assert tg.drafts == [] and len(tg.calls_to("sendMessageDraft")) == 1  # stopped after the refusal
    [preview] = tg.messages_to(ALICE)  # the one message: no duplicate of the answer beside it
    assert preview.text == "Here is"
    edits = [e for e in tg.edits if e.message_id == preview.message_id]
    assert len(edits) >= 2  # at least one while writing, then the final one
    texts = [preview.text] + [e.text for e in edits]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert edits[-1].text == FINAL and any(e["type"] == "bold" for e in edits[-1].entities)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise([preview, *edits[:-1]])]
    assert all(gap >= 1.0 for gap in gaps)  # at most one preview edit a second
    assert (await transcript_rows(bot_runtime))[-1] == ("assistant", "text", "".join(PIECES))


async def test_a_server_without_drafts_previews_by_edits(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.5
    tg.drafts_refused = True
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FINAL])
    assert len(tg.messages_to(ALICE)) == 1 and len(tg.edits) >= 2
    tg.user_message(ALICE, "and again?")  # every turn tries drafts, then falls back again
    await shows(tg, ALICE, [FINAL, FINAL])
    assert len(tg.calls_to("sendMessageDraft")) == 2 and len(tg.messages_to(ALICE)) == 2


async def test_flood_control_is_honoured_before_the_next_edit(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.8  # 4 s of writing
    tg.drafts_refused = True
    tg.fail_next(
        "editMessageText", error_code=429, description="Too Many Requests: retry after 2", retry_after=2
    )
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FINAL])
    [preview] = tg.messages_to(ALICE)
    # The first edit (a second after the preview) was refused; the next waited the 2 s asked for.
    assert len(tg.calls_to("editMessageText")) >= 3
    assert tg.edits[0].at - preview.at >= 3.0


async def test_a_failure_mid_stream_turns_the_preview_into_the_apology(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.fail_after, writer.pause = 3, 0.5
    tg.drafts_refused = True
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FAULT_APOLOGY])
    [preview] = tg.messages_to(ALICE)
    assert preview.text.startswith("Here is") and tg.edits[-1].text == FAULT_APOLOGY


async def test_a_refused_final_edit_deletes_the_preview_and_sends_the_answer(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.05  # done before the first preview edit is due: only the final edit comes
    tg.drafts_refused = True
    for _ in range(2):  # the formatted edit, then the plain one
        tg.fail_next("editMessageText", description="Bad Request: message can't be edited")
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FINAL])
    preview, answer = tg.messages_to(ALICE)
    assert tg.deleted == [(ALICE, preview.message_id)] and answer.text == FINAL
    assert any(e["type"] == "bold" for e in answer.params["entities"])


async def test_flood_control_on_the_final_edit_retries_the_edit(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.05  # only the final edit comes
    tg.drafts_refused = True
    tg.fail_next(
        "editMessageText", error_code=429, description="Too Many Requests: retry after 1", retry_after=1
    )
    tg.user_message(ALICE, "what's the plan?")
    await shows(tg, ALICE, [FINAL])
    [preview] = tg.messages_to(ALICE)  # the answer went into the preview after the wait
    assert len(tg.calls_to("editMessageText")) == 2 and tg.edits[-1].at - preview.at >= 1.0


@pytest.mark.parametrize("bot_runtime", [{"stream_edit_fallback": False}], indirect=True)
async def test_without_the_fallback_refused_drafts_give_the_answer_only(
    bot_runtime: Runtime, tg: FakeTelegram
) -> None:
    tg.drafts_refused = True
    tg.user_message(ALICE, "what's the plan?")
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert final.text == FINAL and tg.calls_to("editMessageText") == []


async def shows(tg: FakeTelegram, chat_id: int, texts: list[str], timeout: float = 15.0) -> None:  # noqa: ASYNC109
    """Wait until the chat shows exactly `texts` (edits applied, deleted messages gone)."""
    deadline = time.monotonic() + timeout
    while (seen := tg.chat_view(chat_id)) != texts:
        assert time.monotonic() < deadline, f"chat {chat_id} shows {seen!r}, not {texts!r}"
        await asyncio.sleep(0.02)


async def test_flood_control_is_honoured_before_the_next_draft(
    bot_runtime: Runtime, tg: FakeTelegram, writer: Writer
) -> None:
    writer.pause = 0.4
    tg.fail_next(
        "sendMessageDraft", error_code=429, description="Too Many Requests: retry after 1", retry_after=1
    )
    started = time.monotonic()
    tg.user_message(ALICE, "what's the plan?")
    [final] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert final.text.startswith("Here is the plan")
    assert tg.drafts, "drafts resumed after the wait"
    assert tg.drafts[0].at - started >= 1.0  # nothing was sent during the second Telegram asked for
