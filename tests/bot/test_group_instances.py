"""Two instances on one PostgreSQL, fed a group's traffic and a member's private chat through the
webhook, each update delivered to one instance or to both (Telegram delivers again when it did not
hear the 200 in time): what the members notice is every line stored once with its speaker, every
addressed message answered once, in the group's order, and the private chat going on beside it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import cycle
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo
from sqlalchemy import select

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.web.app import WEBHOOK_PATH
from db.models import InboxUpdate, TranscriptMessage, User
from tests.bot.conftest import Brain, FirstTurnsMeet, user_prompts
from tests.bot.delivery_helpers import WEBHOOK_HEADERS, running_bot, webhook_client, webhook_settings

pytestmark = [pytest.mark.both_databases, pytest.mark.process]

GROUP = -1009876543210
ANA, BOB, CAT = 21, 22, 23
NAMES = {ANA: "Ana", BOB: "Bob", CAT: "Cat"}
TO_YOU = " (to you): "
# Who gets each update, in turn: the first instance, the second, both at once (a repeat racing the
# first delivery), the second, the first.
ROUTES: tuple[tuple[int, ...], ...] = ((0,), (1,), (0, 1), (1,), (0,))


def newest_line(prompt: str) -> str:
    """The answer to a prompt: its last line echoed (a group prompt ends with the addressed message)."""
    return f"echo: {prompt.splitlines()[-1]}"


def chat_of(messages: list[ModelMessage]) -> str:
    """Which chat a request is of: the group's prompts name who spoke to the bot."""
    return "group" if TO_YOU in user_prompts(messages)[-1] else "private"


@dataclass
class GroupBrain(Brain):
    """Echoes the newest line; records the prompt of each group turn, the history of each private
    turn, and how many turns of one chat ran at once. The first turns of the group and the private
    chat meet (`FirstTurnsMeet`), so their overlap does not depend on the machine's load."""

    reply: Callable[[str], str] = newest_line
    group_prompts: list[str] = field(default_factory=list)
    private_seen: dict[str, list[str]] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    most: dict[str, int] = field(default_factory=dict)
    meet: FirstTurnsMeet = field(default_factory=lambda: FirstTurnsMeet(("group", "private")))

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts, chat = user_prompts(messages), chat_of(messages)
        if chat == "group":
            self.group_prompts.append(prompts[-1])
        else:
            self.private_seen[prompts[-1]] = prompts[:-1]
        self.running[chat] = self.running.get(chat, 0) + 1
        self.most[chat] = max(self.most.get(chat, 0), self.running[chat])
        try:
            return await super().__call__(messages, info)
        finally:
            self.running[chat] -= 1

    async def before_answer(self, messages: list[ModelMessage]) -> None:
        """The chat's first turn waits for the other chat's."""
        await self.meet(chat_of(messages))


@dataclass
class Feed:
    """Posts updates to the two instances' webhooks by ROUTES, in order; keeps every update sent."""

    clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
    routes: Iterator[tuple[int, ...]] = field(default_factory=lambda: cycle(ROUTES))
    sent: list[dict[str, Any]] = field(default_factory=list)

    async def post(self, update: dict[str, Any], to: tuple[int, ...] | None = None) -> None:
        """One delivery of `update` to each instance of `to` (the next route when None), at once."""
        route = next(self.routes) if to is None else to
        answers = await asyncio.gather(
            *(self.clients[i].post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS) for i in route)
        )
        assert [a.status_code for a in answers] == [200] * len(route)
        if update not in self.sent:
            self.sent.append(update)


@dataclass
class Said:
    """One member's message in the group, as the test expects to find it."""

    who: int
    text: str
    message_id: int
    addressed: bool


async def test_two_instances_answer_a_groups_addressed_messages_once_in_order_beside_a_private_chat(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("several instances share one PostgreSQL; SQLite is one process")
    brain = GroupBrain(delay=0.1)
    # A chat's next row, stored by one instance while the other worked the one before, can wait for
    # a poll of the inbox: polling often keeps the test short.
    settings = webhook_settings(settings_factory, inbox_webhook_wait_seconds=0, inbox_poll_seconds=0.2)
    said: list[Said] = []
    private = [f"private {n}" for n in range(5)]

    async def group_says(feed: Feed, who: int, text: str, *, addressed: bool, **how: Any) -> None:
        if how.pop("mention", False):
            update = tg.mention(GROUP, who, text, first_name=NAMES[who], **how)
        else:
            update = tg.group_message(GROUP, who, text, first_name=NAMES[who], **how)
        message = update["message"]
        said.append(Said(who, message["text"], message["message_id"], addressed))
        await feed.post(update)

    async def the_group(feed: Feed) -> None:
        await group_says(feed, ANA, "who is bringing the tent?", addressed=False)
        await group_says(feed, BOB, "I can", addressed=False, reply_to=said[-1].message_id)
        await group_says(feed, CAT, "what should we cook?", addressed=True, mention=True)
        await group_says(feed, ANA, "pasta is easy", addressed=False)
        await group_says(feed, BOB, "Nikita, how cold is it at night in May?", addressed=True)
        # A reply to the bot's first answer addresses it too.
        first = (await tg.wait_for_messages(1, chat_id=GROUP, timeout=30))[0]
        await group_says(feed, CAT, "and for four people?", addressed=True, reply_to=first.message_id)
        await group_says(feed, ANA, "I'll bring the stove", addressed=False)
        await group_says(feed, BOB, "and I the map", addressed=False)
        await group_says(feed, CAT, "which lake is warmer?", addressed=True, mention=True)
        await group_says(feed, ANA, "thanks nikita", addressed=True)
        await group_says(feed, BOB, "see you all saturday", addressed=False)

    async def the_private_chat(feed: Feed) -> None:
        for text in private:
            await feed.post(tg.user_message(ANA, text, first_name="Ana"))

    async with (
        running_bot(settings, brain, webhook=True) as (one, app_one, runner_one),
        running_bot(settings, brain, webhook=True) as (two, app_two, runner_two),
        webhook_client(app_one, one) as first,
        webhook_client(app_two, two) as second,
    ):
        group_feed, private_feed = Feed((first, second)), Feed((first, second), routes=cycle(ROUTES[2:]))
        # Telegram delivers one chat's updates in order, the next after the last was acknowledged;
        # two chats go side by side.
        await asyncio.gather(the_group(group_feed), the_private_chat(private_feed))
        asked = [s for s in said if s.addressed]
        await tg.wait_for_messages(len(asked), chat_id=GROUP, timeout=60)
        await tg.wait_for_messages(len(private), chat_id=ANA, timeout=60)
        assert all(
            [await runner_one.dispatcher.drain(within=10), await runner_two.dispatcher.drain(within=10)]
        )
        answers, shown = tg.messages_to(GROUP), (tg.messages_to(GROUP), tg.messages_to(ANA))
        # Late repeats of everything (the 200s Telegram never heard): each instance hears each again.
        repeats = Feed((first, second))
        for update in group_feed.sent + private_feed.sent:
            await repeats.post(update, to=(0, 1))
        assert all(
            [await runner_one.dispatcher.drain(within=10), await runner_two.dispatcher.drain(within=10)]
        )
        assert (tg.messages_to(GROUP), tg.messages_to(ANA)) == shown
        worked = (runner_one.dispatcher.worked, runner_two.dispatcher.worked)
        async with one.sessions() as session:
            rows = (
                await session.execute(
                    select(
                        TranscriptMessage.role,
                        TranscriptMessage.speaker_telegram_id,
                        TranscriptMessage.speaker_name,
                        TranscriptMessage.content,
                    )
                    .join(User, User.id == TranscriptMessage.user_id)
                    .where(User.chat_id == GROUP)
                    .order_by(TranscriptMessage.id)
                )
            ).all()
            kinds = sorted(
                (kind, telegram_id)
                for kind, telegram_id in await session.execute(select(User.kind, User.telegram_id))
            )
            inbox = await session.scalar(select(InboxUpdate.id).where(InboxUpdate.status != "done"))
    # Every row worked once between them. Which instance claims a row is a race: on a loaded machine
    # one may take them all, which is no fault (the other stands by for its leases).
    assert sum(worked) >= len(said) and max(worked) > 0, worked
    assert inbox is None

    # Every member's line once, with its speaker, in the order it was said.
    lines = [(who, name, text) for role, who, name, text in rows if role == "user"]
    assert lines == [(s.who, NAMES[s.who], s.text) for s in said]
    # Every addressed message answered once, as a reply to it, in the group's order.
    assert [reply_target(a) for a in answers] == [s.message_id for s in asked]
    assert [a.text for a in answers] == [f"echo: {NAMES[s.who]}{TO_YOU}{s.text}" for s in asked]
    assert [role for role, *_ in rows].count("assistant") == len(asked)
    # Each turn got what was heard since the last answer, then its message: the group's order held.
    expected: list[str] = []
    heard: list[str] = []
    for s in said:
        if s.addressed:
            expected.append("\n".join([*heard, f"{NAMES[s.who]}{TO_YOU}{s.text}"]))
            heard = []
        else:
            heard.append(f"{NAMES[s.who]}: {s.text}")
    assert brain.group_prompts == expected

    # The private chat went on beside the group: answered once each, in order, with its own history.
    assert [m.text for m in tg.messages_to(ANA)] == [f"echo: {text}" for text in private]
    assert brain.private_seen == {text: private[:n] for n, text in enumerate(private)}
    assert brain.most == {"group": 1, "private": 1}  # never two turns of one chat at once
    assert brain.most_in_flight == 2  # the group and the private chat side by side
    # Only Ana, who wrote privately, is a person of the bot; the group is its own owner.
    assert kinds == [("group", None), ("person", ANA)]


def reply_target(sent: Any) -> int:
    """The message id an answer replies to."""
    return int(sent.params["reply_parameters"]["message_id"])
