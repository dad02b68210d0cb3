"""How a line of a conversation imported from another assistant's export is shown.

An imported conversation (kind in IMPORTED_KINDS) holds the person's lines (role `user`) and the other
assistant's (role OTHER), never the companion's. Wherever such a line reaches the model or a page it
carries its source and its day in the person's zone, "[ChatGPT, 12 Mar 2024] you: ..." or
"[ChatGPT, 12 Mar 2024] ChatGPT: ...", so it reads as what the person told ChatGPT then, never as a
talk with the companion.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.clock import ensure_utc, zone_of
from db.models import IMPORTED_KINDS, Conversation, TranscriptMessage, User

# A transcript line's kind when an import stored it.
IMPORTED_LINE = "imported"
_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude"}
# Who wrote an imported line of the person's, as its label says.
YOU = "you"


def source_name(kind: str) -> str:
    """The other assistant's name for a conversation kind ("chatgpt" -> "ChatGPT")."""
    return _NAMES.get(kind, kind)


def day_words(at: datetime, timezone: str) -> str:
    """An instant's day in the person's zone, as "12 Mar 2024"."""
    local = ensure_utc(at).astimezone(zone_of(timezone))
    return f"{local.day} {local:%b %Y}"


@dataclass(frozen=True)
class Source:
    """An imported line: its conversation's kind, who wrote it (`user`, or OTHER: the assistant),
    when, and the person's zone."""

    kind: str
    role: str
    sent_at: datetime
    timezone: str

    def tag(self) -> str:
        """ "[ChatGPT, 12 Mar 2024]"."""
        return f"[{source_name(self.kind)}, {day_words(self.sent_at, self.timezone)}]"

    def speaker(self) -> str:
        """ "you" for the person's line, the assistant's name for its own."""
        return YOU if self.role == "user" else source_name(self.kind)

    def line(self, text: str) -> str:
        """ "[ChatGPT, 12 Mar 2024] you: text"."""
        return f"{self.tag()} {self.speaker()}: {text}"


async def imported_sources(
    session: AsyncSession, user_id: int, message_ids: Collection[int]
) -> dict[int, Source]:
    """The sources of those of the person's lines that were imported, by id (other people's ids and
    the lines said to the companion find nothing)."""
    if not message_ids:
        return {}
    rows = await session.execute(
        select(
            TranscriptMessage.id,
            TranscriptMessage.user_id,
            Conversation.kind,
            TranscriptMessage.role,
            TranscriptMessage.sent_at,
            User.timezone,
        )
        .join(Conversation, Conversation.id == TranscriptMessage.conversation_id)
        .join(User, User.id == TranscriptMessage.user_id)
        # The owner is checked below: a user_id term here walks the person's whole index on SQLite
        # (agent/search/turns.py, `by_ids`).
        .where(
            TranscriptMessage.id.in_(sorted({int(i) for i in message_ids})),
            Conversation.kind.in_(IMPORTED_KINDS),
        )
    )
    return {
        int(i): Source(kind, role, sent_at, timezone or "UTC")
        for i, owner, kind, role, sent_at, timezone in rows.all()
        if owner == user_id
    }
