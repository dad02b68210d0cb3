"""The imports table as the surfaces read it: one person's run by id, the runs a restart interrupted,
and the chat message that shows a run's progress. The caller owns the transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import ImportRun

RUNNING = "running"


class ImportRunRepository:
    """Reads and small writes on `imports` for the Telegram and Mini App surfaces."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def owned(self, user_id: int, import_id: int) -> ImportRun | None:
        """The run `import_id` when it is `user_id`'s; another person's looks exactly like a missing one."""
        return await self.session.scalar(
            select(ImportRun).where(ImportRun.id == import_id, ImportRun.user_id == user_id)
        )

    async def interrupted(self) -> Sequence[ImportRun]:
        """Runs left `running` (a stop or a crash mid-import), oldest first: resumed at the bot's start."""
        rows = await self.session.scalars(
            select(ImportRun).where(ImportRun.status == RUNNING).order_by(ImportRun.id)
        )
        return rows.all()

    async def set_progress_message(self, import_id: int, chat_id: int, message_id: int) -> None:
        """Remember the chat message edited with the run's progress (kept across a restart)."""
        run = await self.session.get(ImportRun, import_id)
        if run is not None:
            run.chat_id = chat_id
            run.progress_message_id = message_id

    async def set_file_ref(self, import_id: int, file_ref: str) -> None:
        """Where the run's file is kept now (a local path), for a resume after a restart."""
        run = await self.session.get(ImportRun, import_id)
        if run is not None:
            run.file_ref = file_ref
