"""Each user's newest valid briefing: read by the turn, replaced by the briefing writer."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Briefing


@dataclass(frozen=True)
class StoredBriefing:
    """A briefing as stored: both variants, the package fingerprint, sizes and cost."""

    user_id: int
    text: str
    voice: str
    fingerprint: str
    text_tokens: int
    voice_tokens: int
    trigger: str
    conversation_id: int | None
    calls: int
    input_tokens: int
    output_tokens: int
    checks: dict[str, Any]
    written_at: datetime


class BriefingRepository:
    """Reads and replaces the `briefings` row of a user; never commits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: int) -> StoredBriefing | None:
        """The user's briefing, if one was ever written."""
        row = (await self.session.execute(select(Briefing).where(Briefing.user_id == user_id))).scalar()
        if row is None:
            return None
        return StoredBriefing(
            user_id=row.user_id,
            text=row.text,
            voice=row.voice,
            fingerprint=row.fingerprint,
            text_tokens=row.text_tokens,
            voice_tokens=row.voice_tokens,
            trigger=row.trigger,
            conversation_id=row.conversation_id,
            calls=row.calls,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            checks=dict(row.checks or {}),
            written_at=row.written_at,
        )

    async def put(self, briefing: StoredBriefing) -> None:
        """Store the briefing as the user's one, replacing the previous (one statement, no race)."""
        values = asdict(briefing)
        dialect = self.session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        stmt = insert(Briefing).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["user_id"], set_={k: v for k, v in values.items() if k != "user_id"}
        )
        await self.session.execute(stmt)
