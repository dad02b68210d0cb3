"""/memory's facts through real python-telegram-bot against the fake Bot API: the profile first, then
the rest, each fact with forget, pin and "don't bring this up" buttons, a page at a time; a forged
press finds nothing; in a group, the group's facts only, changed by its admins only."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from agent.account.group_forget import forget_group_words
from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.turn.transcript import Speaker, write_message
from bench.fakes.telegram_api import FakeTelegram, SentMessage
from bot.app import AnyApplication
from bot.handlers.memory_facts import ADMINS_ONLY, GONE, LINE_CHARS, PAGE_SIZE
from bot.runtime import Runtime
from db.models import User, UserFact
from db.repositories.facts import FactRepository
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases

ANA, BO = 81, 82
GROUP = -5001


def _press(tg: FakeTelegram, data: str, message_id: int, presser: int, *, chat: int | None = None) -> None:
    where = (
        {"id": presser, "type": "private", "first_name": "Ana"}
        if chat is None
        else {"id": chat, "type": "group", "title": "Friends"}
    )
    tg.push_update(
        {
            "callback_query": {
                "id": f"cb-{data}-{presser}-{len(tg.calls)}",
                "from": {"id": presser, "is_bot": False, "first_name": "Ana"},
                "chat_instance": "1",
                "data": data,
                "message": {"message_id": message_id, "date": 0, "chat": where, "text": "memory"},
            }
        }
    )


async def _edit(tg: FakeTelegram, n: int, chat: int) -> dict[str, Any]:
    """The n-th edit of a message in `chat`, once it was made."""
    deadline = time.monotonic() + 10
    while len(edits := [c.params for c in tg.calls_to("editMessageText") if c.params["chat_id"] == chat]) < n:
        assert time.monotonic() < deadline, f"waited for edit {n} in {chat}"
        await asyncio.sleep(0.01)
    return edits[n - 1]


def _rows(sent: SentMessage | dict[str, Any]) -> list[list[dict[str, str]]]:
    params = sent.params if isinstance(sent, SentMessage) else sent
    return list(params["reply_markup"]["inline_keyboard"])


def _button(rows: list[list[dict[str, str]]], text: str) -> str:
    (data,) = [b["callback_data"] for row in rows for b in row if b["text"] == text]
    return data


async def _people(runtime: Runtime) -> dict[int, int]:
    users = {}
    for telegram_id, name in ((ANA, "Ana"), (BO, "Bo")):
        user, _ = await get_or_create_user(
            runtime.sessions,
            key=f"telegram:{telegram_id}",
            now=runtime.clock.now(),
            timezone="UTC",
            name=name,
            telegram_id=telegram_id,
        )
        users[telegram_id] = user.id
    return users


async def _flags(runtime: Runtime, content: str) -> tuple[bool, bool, bool]:
    """(pinned, hidden, held) of the fact with these words."""
    async with runtime.sessions() as session:
        fact = await session.scalar(select(UserFact).where(UserFact.content == content))
    assert fact is not None
    return fact.pinned, fact.hidden, fact.invalidated_at is None


async def test_memory_shows_the_profile_then_the_rest_and_each_button_changes_one_fact(
    runtime: Runtime, app: AnyApplication, tg: FakeTelegram
) -> None:
    users = await _people(runtime)
    now = runtime.clock.now()
    async with runtime.sessions() as session, session.begin():
        facts = FactRepository(session)
        for n in range(PAGE_SIZE + 2):
            await add_facts(
                facts, users[ANA], None, [f"Ana fact number {n}"], now + timedelta(seconds=n), source="tool"
            )
        await add_facts(facts, users[ANA], None, ["Ana had a hard winter"], now, source="extraction")
        winter = (await facts.held(users[ANA], newest_first=True))[0]
        await facts.set_flags(users[ANA], winter.id, now, hidden=True)
        await add_facts(facts, users[BO], None, ["Bo keeps bees"], now, source="tool")

    tg.command(ANA, "/memory")
    report, listing = await tg.wait_for_messages(2, chat_id=ANA)
    assert report.text.startswith("Here's what I remember about you.") and "fact number" not in report.text
    lines = listing.text.splitlines()
    assert lines[0] == "What I know about you (page 1 of 2):"
    assert lines[2] == "In your profile, which I read every time we talk:"
    numbered = [line for line in lines if line[:1].isdigit()]
    assert len(numbered) == PAGE_SIZE and numbered[0].startswith("1. Ana fact number")
    rows = _rows(listing)
    assert [b["text"] for b in rows[0]] == ["1 Forget", "1 Pin", "1 Don't bring up"]
    assert rows[-1][0]["text"] == "More ›" and len(rows) == PAGE_SIZE + 1
    assert all(len(b["callback_data"].encode()) <= 64 for row in rows for b in row)
    first = numbered[0].split(". ", 1)[1]

    # The last page holds the hidden fact, marked, with the button that brings it back.
    _press(tg, _button(rows, "More ›"), listing.message_id, ANA)
    second = await _edit(tg, 1, ANA)
    assert "Kept, but I don't bring these up unless you ask:\n11. Ana had a hard winter" in second["text"]
    assert _button(_rows(second), "11 Bring up again").startswith("memfact:show:")

    # Pin the first fact on page 1: it stays first, marked.
    _press(tg, _button(rows, "1 Pin"), listing.message_id, ANA)
    pinned = await _edit(tg, 2, ANA)
    assert f"1. 📌 {first}" in pinned["text"] and await _flags(runtime, first) == (True, False, True)
    assert [b["text"] for b in _rows(pinned)[0]] == ["1 Forget", "1 Unpin", "1 Don't bring up"]

    # Bo presses Ana's button in his own chat (a forged press): it finds nothing of hers.
    hide = _button(_rows(pinned), "1 Don't bring up")
    _press(tg, hide, listing.message_id, BO)
    answered = await tg.wait_for_calls("answerCallbackQuery", 3)
    assert answered[-1].params.get("text") == GONE and await _flags(runtime, first) == (True, False, True)

    # Ana hides it: no longer in the profile (hiding unpins), listed as kept.
    _press(tg, hide, listing.message_id, ANA)
    hidden = await _edit(tg, 3, ANA)
    assert await _flags(runtime, first) == (False, True, True)
    assert first not in hidden["text"]  # page 1 is the profile now; the hidden ones are at the end

    # Forget the new first one.
    gone = hidden["text"].splitlines()[3].split(". ", 1)[1]
    _press(tg, _button(_rows(hidden), "1 Forget"), listing.message_id, ANA)
    assert gone not in (await _edit(tg, 4, ANA))["text"]
    async with runtime.sessions() as session:
        taken = (
            await session.execute(
                select(UserFact.content, UserFact.invalid_reason).where(UserFact.invalidated_at.is_not(None))
            )
        ).all()
    assert [tuple(t) for t in taken] == [(gone, "they pressed forget under /memory")]
    assert await _flags(runtime, "Bo keeps bees") == (False, False, True)


async def _said(
    runtime: Runtime, owner_id: int, text: str, at: datetime, speaker: Speaker | None = None
) -> int:
    """Store one line the person (in a group, a member) wrote; its transcript id."""
    async with runtime.sessions() as session, session.begin():
        owner = await session.get(User, owner_id)
        assert owner is not None
        return (
            await write_message(session, owner, role="user", content=text, sent_at=at, speaker=speaker)
        ).id


async def test_each_fact_says_where_it_comes_from(
    runtime: Runtime, app: AnyApplication, tg: FakeTelegram
) -> None:
    users = await _people(runtime)
    sunday = datetime(2026, 3, 1, 17, 0, tzinfo=UTC)
    group, _ = await group_owner(runtime.sessions, chat_id=GROUP, title="Friends", now=sunday, timezone="UTC")
    moved = await _said(runtime, users[ANA], "I moved to Porto last week, finally!", sunday)
    cello = await _said(runtime, group.id, "I'll bring the cello", sunday, Speaker(ANA, "Ana"))
    cake = await _said(runtime, group.id, "I'm baking the cake", sunday, Speaker(BO, "Bo"))
    async with runtime.sessions() as session, session.begin():
        facts = FactRepository(session)
        # The group's lines named by Ana's private fact are not hers to see there, and the reverse.
        await facts.add_sourced(
            users[ANA], None, [("Ana lives in Porto", [moved, cello])], sunday, source="extraction"
        )
        await add_facts(facts, users[ANA], None, ["Ana is allergic to nuts"], sunday, source="tool")
        await facts.add_sourced(
            group.id,
            None,
            [("Ana brings the cello", [cello, moved]), ("Bo bakes the cake", [cake])],
            sunday,
            source="extraction",
        )

    tg.command(ANA, "/memory")
    _, listing = await tg.wait_for_messages(2, chat_id=ANA)
    assert "Ana is allergic to nuts\n   ↳ you asked me to remember this on 1 Mar 2026" in listing.text
    assert "Ana lives in Porto\n   ↳ you said on 1 Mar 2026: “I moved to Porto last week, finally!”\n" in (
        listing.text
    )
    assert "cello" not in listing.text

    # Ana deletes her words in groups: the group's fact that stood on them has no source left.
    assert await forget_group_words(runtime.sessions, ANA) == 1
    tg.group_command(GROUP, BO, "/memory", first_name="Bo")
    _, in_group = await tg.wait_for_messages(2, chat_id=GROUP)
    assert "Ana brings the cello\n   ↳ no source left: the messages it came from are gone" in in_group.text
    assert "Bo bakes the cake\n   ↳ Bo said on 1 Mar 2026: “I'm baking the cake”" in in_group.text
    assert "Porto" not in in_group.text


async def test_long_facts_keep_the_page_under_telegrams_limit(
    runtime: Runtime, app: AnyApplication, tg: FakeTelegram
) -> None:
    users = await _people(runtime)
    # The longest source lines: asked for, and said at length many times, on a long month's day.
    said = [
        await _said(runtime, users[ANA], "a very long line " * 40, datetime(2026, 9, 30, 12, n, tzinfo=UTC))
        for n in range(12)
    ]
    async with runtime.sessions() as session, session.begin():
        await FactRepository(session).add_sourced(
            users[ANA],
            None,
            [(f"Ana {n} " + "told a very long story " * 60, said) for n in range(PAGE_SIZE + 1)],
            runtime.clock.now(),
            source="tool",
        )
    tg.command(ANA, "/memory")
    _, listing = await tg.wait_for_messages(2, chat_id=ANA)  # the fake refuses over 4,096, as Telegram
    assert len(listing.text) <= 4096 and "…" in listing.text
    assert max(len(line) for line in listing.text.splitlines()) <= LINE_CHARS + len("8. ")
    sources = [line for line in listing.text.splitlines() if line.startswith("   ↳ ")]
    assert len(sources) == PAGE_SIZE and sources[0].startswith(
        "   ↳ you asked me to remember this; you said on 30 Sep 2026: “a very long line"
    )


async def test_a_groups_memory_lists_its_own_facts_and_only_its_admins_change_them(
    runtime: Runtime, app: AnyApplication, tg: FakeTelegram
) -> None:
    users = await _people(runtime)
    now = runtime.clock.now()
    group, _ = await group_owner(runtime.sessions, chat_id=GROUP, title="Friends", now=now, timezone="UTC")
    async with runtime.sessions() as session, session.begin():
        facts = FactRepository(session)
        await add_facts(facts, group.id, None, ["The group meets on Saturdays"], now, source="extraction")
        await add_facts(facts, users[ANA], None, ["Ana is allergic to nuts"], now, source="tool")
        private = (await facts.held(users[ANA]))[0].id

    tg.group_command(GROUP, BO, "/memory", first_name="Bo")
    report, listing = await tg.wait_for_messages(2, chat_id=GROUP)
    assert report.text.startswith("Here's what I remember of this group.")
    assert "In this group's profile, which I read whenever I answer here:" in listing.text
    assert "Saturdays" in listing.text and "nuts" not in listing.text  # never a member's private fact
    rows = _rows(listing)

    # Bo is no admin: told so, nothing changes.
    _press(tg, _button(rows, "1 Pin"), listing.message_id, BO, chat=GROUP)
    answered = await tg.wait_for_calls("answerCallbackQuery", 1)
    assert answered[-1].params.get("text") == ADMINS_ONLY
    assert await _flags(runtime, "The group meets on Saturdays") == (False, False, True)

    # Ana administers the group: her pin works; a forged press with her private fact's id finds nothing.
    tg.make_admin(GROUP, ANA)
    _press(tg, _button(rows, "1 Pin"), listing.message_id, ANA, chat=GROUP)
    assert "1. 📌 The group meets on Saturdays" in (await _edit(tg, 1, GROUP))["text"]
    _press(tg, f"memfact:hide:{private}:1", listing.message_id, ANA, chat=GROUP)
    answered = await tg.wait_for_calls("answerCallbackQuery", 3)
    assert answered[-1].params.get("text") == GONE
    assert await _flags(runtime, "Ana is allergic to nuts") == (False, False, True)
    assert await _flags(runtime, "The group meets on Saturdays") == (True, False, True)
