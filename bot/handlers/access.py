"""The access gate: runs before every handler and stops updates from people who may not use the bot.

A refused update leaves no user row, no transcript row and no model call: its inbox row ends done
with its payload dropped, like every finished row, and the day's bot-wide counters go up (refused
updates; strangers told, who are counted by the rate limiter's keyed hash, never by id). A stranger
in a private chat is told STRANGER_REPLY once a day; whatever else they send is dropped quietly. The
decision and the counters commit together, keyed on the message: its inbox row run again after a
crash tells the same message again (its reply may not have gone out; the inbox records it with the
chunk Telegram accepted, like every answer) and counts nothing twice.
In a group chat the group decides (agent/account/access.py), and a refused group is told nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC

from telegram import Update
from telegram.constants import ChatType
from telegram.ext import ApplicationHandlerStop

from agent.account.access import REFUSED, STRANGERS
from agent.account.ratelimit import Verdict
from agent.core import observability
from bot.handlers.context import HandlerContext
from bot.services import telegram_identity
from db.repositories.access import AccessRepository

logger = logging.getLogger(__name__)

# The handler group the gate runs in: before group 0 (every handler) and group -1.
GATE_GROUP = -10


async def gate(update: Update, context: HandlerContext) -> None:
    """Let the update through, or refuse it here (ApplicationHandlerStop: no other handler runs)."""
    person, chat = update.effective_user, update.effective_chat
    s = context.services
    if chat is not None and chat.type in (ChatType.GROUP, ChatType.SUPERGROUP):
        who, name = (person.id, person.username) if person is not None else (None, None)
        if await s.access.allows_group(chat.id, who, name):
            return
    elif person is None or await s.access.allows(person.id, person.username):
        return
    now = s.runtime.clock.now()
    row = context.row_if_any
    verdict: Verdict | None = None
    async with s.runtime.sessions() as session, session.begin():
        if person is not None and chat is not None and chat.type == ChatType.PRIVATE and row is not None:
            # A new message is its own key: its row run again after a crash finds what was decided.
            message = update.message
            verdict = await s.limiter.refusal_in(
                session,
                telegram_identity(person),
                now if message is None else message.date,
                "stranger",
                once_for=None if message is None else message.message_id,
            )
        if verdict is None or not verdict.again:  # counted when it was decided
            counters = AccessRepository(session)
            day = now.astimezone(UTC).date()
            await counters.bump(day, REFUSED)
            if verdict is not None and verdict.tell:
                await counters.bump(day, STRANGERS)
    answer: str | None = None
    if verdict is not None:
        await s.limiter.prune(now)
        answer = verdict.message if verdict.tell else None
    if row is not None and verdict is not None and answer is not None:
        # The inbox sends it, as it sends every answer; told before: it may have gone out already.
        row.answer(answer, repeated=verdict.again)
    elif row is not None:
        row.outcome = "refused"
    logger.info("update refused", extra={"update_id": update.update_id, "told": answer is not None})
    observability.refused("not_allowed")
    raise ApplicationHandlerStop
