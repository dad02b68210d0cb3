"""What every repository holds: the caller's session."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession


class Repository:
    """Statements in the caller's session; the caller owns the transaction."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
