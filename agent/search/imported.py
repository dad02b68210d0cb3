"""conversation_search and conversation_get label every line imported from another assistant's
export with its source and day in the person's zone ("[ChatGPT, 12 Mar 2024] you: ..."), and name
its speaker "you" or that assistant, so the model reads it as what the person told ChatGPT then,
never as its own words or a talk with itself (agent/history/imported.py)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from agent.history.imported import Source, imported_sources
from agent.search.get import MessageOut, MessagesOut
from agent.search.query import SearchHit
from agent.search.turns import Neighbour


def _neighbour(turn: Neighbour | None, sources: dict[int, Source]) -> Neighbour | None:
    source = sources.get(turn.message_id) if turn is not None else None
    if turn is None or source is None:
        return turn
    return replace(turn, speaker=source.speaker(), text=source.line(turn.text))


async def labelled_hits(session: AsyncSession, user_id: int, hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with their imported lines (and the imported turns beside them) labelled."""
    ids = {h.message_id for h in hits if h.message_id is not None}
    ids |= {t.message_id for h in hits for t in (h.previous_turn, h.next_turn) if t is not None}
    sources = await imported_sources(session, user_id, ids)
    if not sources:
        return hits
    out: list[SearchHit] = []
    for hit in hits:
        source = sources.get(hit.message_id or 0)
        if source is not None:
            hit = replace(hit, speaker=source.speaker(), snippet=source.line(hit.snippet or ""))
        out.append(
            replace(
                hit,
                previous_turn=_neighbour(hit.previous_turn, sources),
                next_turn=_neighbour(hit.next_turn, sources),
            )
        )
    return out


async def labelled_messages(session: AsyncSession, user_id: int, found: MessagesOut) -> MessagesOut:
    """conversation_get's messages with their imported lines labelled and their speaker named."""
    sources = await imported_sources(session, user_id, [m.message_id for m in found.messages])
    if not sources:
        return found

    def shown(message: MessageOut) -> MessageOut:
        source = sources.get(message.message_id)
        if source is None:
            return message
        return replace(message, speaker=source.speaker(), content=source.line(message.content))

    return replace(found, messages=[shown(m) for m in found.messages])
