"""/memory's list of facts: the profile as the bot reads it, then the rest, a page at a time, each
fact with a line saying where it comes from (the person's words, quoted briefly and dated, or how else
it came: agent/memory/provenance.py) and buttons to forget it, pin or unpin it, and hide it ("don't
bring this up") or bring it up again (agent/memory/listing.py).

In a private chat the buttons act on the presser's own facts. In a group they act on the group's
facts, and only for the group's Telegram admins, as /forget there does: the list is the group's and
every member may read it and turn its pages, while changing what the bot keeps of the group is the
admins' say. Whatever a button's data names, the fact is looked up under that owner, so a forged
press with someone else's fact id finds nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatType
from telegram.error import BadRequest

from agent.account.group_forget import group_owner_id
from agent.memory.listing import (
    FLAGS,
    Flag,
    Listed,
    Listing,
    listing_lines,
    listing_of,
    set_flag,
)
from agent.reports.texts import memory_report
from bot.delivery.sending import split_text
from bot.handlers.admins import asked_admin
from bot.handlers.commands import own_chat
from bot.handlers.context import HandlerContext, sender
from bot.runtime import Runtime
from db.models import User
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

PREFIX = "memfact"
PAGE_SIZE = 8
# 8 facts of at most this many characters, each with its source line, their headings and the legend
# stay under Telegram's 4,096.
LINE_CHARS = 280
SOURCE_CHARS = 150
# The person's words a source line quotes: enough to recognise the line, the Mini App shows more.
QUOTE_CHARS = 50
NOTHING = ("I don't remember any facts about you yet.", "I don't remember any facts about this group yet.")
NOT_HERE = "This button only works in your own chat with me: /memory"
ADMINS_ONLY = "Only this group's admins can change what I remember of it."
GONE = "That one is no longer in the list."
REASON = "they pressed forget under /memory"
LEGEND = "Pin: first in the profile. Don't bring up: kept, found when asked about, never raised unasked."
DONE: dict[str, str] = {
    "forget": "Forgotten.",
    "pin": "Pinned: first in the profile.",
    "unpin": "Unpinned.",
    "hide": "I won't bring it up; it's still here when asked about.",
    "show": "I'll bring it up again when it matters.",
}


# A message's text and its buttons.
Reply = tuple[str, InlineKeyboardMarkup | None]
_FLAG_OF: dict[str, Flag] = {flag: flag for flag in FLAGS}


@dataclass(frozen=True)
class Page:
    """One page of a listing: its facts and the number of the first."""

    listing: Listing
    page: int
    pages: int
    facts: tuple[Listed, ...]
    first: int


def paged(listing: Listing, page: int) -> Page:
    """The page of the listing, its number kept in range."""
    pages = max(1, -(-len(listing.facts) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    start = (page - 1) * PAGE_SIZE
    return Page(listing, page, pages, listing.facts[start : start + PAGE_SIZE], start + 1)


def _button(text: str, action: str, fact_id: int, page: int) -> InlineKeyboardButton:
    # At most 7 + 1 + 6 + 1 + 19 + 1 + 19 bytes: well under Telegram's 64 for callback_data.
    return InlineKeyboardButton(text, callback_data=f"{PREFIX}:{action}:{fact_id}:{page}")


def page_message(page: Page, *, group: bool = False) -> Reply:
    """The page's text and its buttons: a row per fact, then the way to the other pages."""
    if not page.facts:
        return NOTHING[group], None
    whose = "this group" if group else "you"
    pages = f" (page {page.page} of {page.pages})" if page.pages > 1 else ""
    lines = [
        f"What I know about {whose}{pages}:",
        "",
        *listing_lines(
            page.facts,
            first_number=page.first,
            group=group,
            line_chars=LINE_CHARS,
            source_chars=SOURCE_CHARS,
            quote_chars=QUOTE_CHARS,
        ),
    ]
    if page.page == page.pages and page.listing.more:
        lines += ["", f"…and {page.listing.more} more, not listed here."]
    lines += ["", LEGEND]
    rows = []
    for number, fact in enumerate(page.facts, start=page.first):
        pin = ("unpin", f"{number} Unpin") if fact.pinned else ("pin", f"{number} Pin")
        hide = ("show", f"{number} Bring up again") if fact.hidden else ("hide", f"{number} Don't bring up")
        rows.append(
            [
                _button(f"{number} Forget", "forget", fact.id, page.page),
                _button(pin[1], pin[0], fact.id, page.page),
                _button(hide[1], hide[0], fact.id, page.page),
            ]
        )
    moves = []
    if page.page > 1:
        moves.append(InlineKeyboardButton("‹ Back", callback_data=f"{PREFIX}:page:{page.page - 1}"))
    if page.page < page.pages:
        moves.append(InlineKeyboardButton("More ›", callback_data=f"{PREFIX}:page:{page.page + 1}"))
    if moves:
        rows.append(moves)
    return "\n".join(lines), InlineKeyboardMarkup(rows)


async def _listing(runtime: Runtime, owner: User) -> Listing:
    return await listing_of(
        runtime.sessions, owner.id, owner.timezone, now=runtime.clock.now(), settings=runtime.settings
    )


async def memory_messages(runtime: Runtime, owner: User, *, group: bool) -> list[Reply]:
    """What /memory sends: the report (threads, follow-ups, today), then the facts' first page with its
    buttons; with no facts, the report says so in its last line."""
    report = await memory_report(runtime.sessions, owner.id, runtime.clock.now(), facts=False)
    listing = await _listing(runtime, owner)
    if not listing.facts:
        return [(chunk, None) for chunk in split_text(f"{report}\n\n{NOTHING[group]}")]
    return [*((chunk, None) for chunk in split_text(report)), page_message(paged(listing, 1), group=group)]


async def on_memory(update: Update, context: HandlerContext) -> None:
    """/memory: threads, follow-ups and today, then the facts with a forget, pin and hide button each."""
    if (c := await sender(update, context, limit="memory")) is None:
        return
    for text, markup in await memory_messages(context.services.runtime, c.user, group=False):
        await context.bot.send_message(chat_id=c.message.chat_id, text=text, reply_markup=markup)


def _parsed(data: str | None) -> tuple[str, int | None, int] | None:
    """(action, fact id, page) of a button's data; None when it is not one of ours."""
    parts = (data or "").split(":")
    if len(parts) < 3 or parts[0] != PREFIX or not all(p.isascii() and p.isdigit() for p in parts[2:]):
        return None
    if parts[1] == "page" and len(parts) == 3:
        return "page", None, int(parts[2])
    if (parts[1] == "forget" or parts[1] in _FLAG_OF) and len(parts) == 4:
        return parts[1], int(parts[2]), int(parts[3])
    return None


async def _owner(context: HandlerContext, query: CallbackQuery, *, changes: bool) -> tuple[User, bool] | None:
    """Whose facts the press acts on (the presser's, or the group's) and whether it is a group; None,
    with the presser told why, when the press may not act."""
    runtime = context.services.runtime
    message = query.message
    if message is not None and message.chat.type in (ChatType.GROUP, ChatType.SUPERGROUP):
        owner_id = await group_owner_id(runtime.sessions, message.chat.id)
        async with runtime.sessions() as session:
            group = await session.get(User, owner_id) if owner_id is not None else None
        if group is None:
            await query.answer(NOTHING[True], show_alert=True)
            return None
        if changes and not await asked_admin(context.bot, message.chat.id, query.from_user.id):
            await query.answer(ADMINS_ONLY, show_alert=True)
            return None
        return group, True
    if own_chat(query) is None:
        await query.answer(NOT_HERE, show_alert=True)
        return None
    async with runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(query.from_user.id)
    if user is None:
        await query.answer(NOTHING[False], show_alert=True)
        return None
    return user, False


async def _apply(runtime: Runtime, owner_id: int, action: str, fact_id: int) -> bool:
    """The press's change to one fact of the owner; False when the owner holds no such fact."""
    at, facts = runtime.clock.now(), runtime.facts
    if facts is None:
        return False
    if action == "forget":
        return await facts.forget_fact(owner_id, fact_id, reason=REASON, at=at) is not None
    done = await set_flag(runtime.sessions, owner_id, fact_id, _FLAG_OF[action], at=at) is not None
    if done:
        facts.changed(owner_id)
    return done


async def on_fact_button(update: Update, context: HandlerContext) -> None:
    """A press under /memory: forget, pin or unpin, hide or show one fact, or turn the page."""
    query = update.callback_query
    if query is None:
        return
    parsed = _parsed(query.data)
    if parsed is None:
        await query.answer(NOT_HERE, show_alert=True)
        return
    action, fact_id, page = parsed
    found = await _owner(context, query, changes=fact_id is not None)
    if found is None:
        return
    owner, group = found
    runtime = context.services.runtime
    if fact_id is None:
        await query.answer()
    elif await _apply(runtime, owner.id, action, fact_id):
        logger.info("fact changed under /memory", extra={"user_id": owner.id, "action": action})
        await query.answer(DONE[action])
    else:
        await query.answer(GONE)
    text, markup = page_message(paged(await _listing(runtime, owner), page), group=group)
    try:
        await query.edit_message_text(text, reply_markup=markup)
    except BadRequest as exc:  # "message is not modified": the page did not change
        logger.info("memory page unchanged", extra={"error": exc.message})
