"""Shared by the inbox tests: a bot wired to the fake Bot API, the inbox rows, table tricks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from bot.app import AnyApplication, build_application, running
from bot.delivery.runner import DeliveryRunner
from bot.runtime import Runtime, build_runtime
from bot.web.app import build_web_app
from db.models import InboxUpdate, TranscriptMessage
from tests.bot.conftest import Brain

WEBHOOK_URL = "https://nikita.example/telegram/webhook"
WEBHOOK_HEADERS = {"X-Telegram-Bot-Api-Secret-Token": "s3cret"}


@asynccontextmanager
async def running_bot(
    settings: Settings, brain: Brain, *, webhook: bool = False
) -> AsyncIterator[tuple[Runtime, AnyApplication, DeliveryRunner]]:
    """A runtime and a running application (polling unless `webhook`); closed on exit."""
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=webhook)
    async with running(application, poll_timeout=1) as runner:
        yield runtime, application, runner


@asynccontextmanager
async def webhook_client(application: AnyApplication, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """The bot's web app, in process."""
    transport = httpx.ASGITransport(app=build_web_app(application, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


def webhook_settings(settings_factory: Callable[..., Settings], **overrides: Any) -> Settings:
    """Settings of webhook mode without onboarding."""
    values: dict[str, Any] = {
        "webhook_url": WEBHOOK_URL,
        "webhook_secret": "s3cret",
        "tasks_secret": "t0ken",
        "onboarding_enabled": False,
    }
    return settings_factory(**{**values, **overrides})


async def inbox_rows(sessions: async_sessionmaker[AsyncSession]) -> list[InboxUpdate]:
    """Every inbox row, oldest first."""
    async with sessions() as session:
        return list((await session.execute(select(InboxUpdate).order_by(InboxUpdate.update_id))).scalars())


async def transcript(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[str, str]]:
    """(role, content) of every stored message, in order."""
    async with sessions() as session:
        rows = await session.execute(
            select(TranscriptMessage.role, TranscriptMessage.content).order_by(TranscriptMessage.id)
        )
        return [(role, content) for role, content in rows.all()]


@asynccontextmanager
async def inbox_table_away(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[None]:
    """The inbox table renamed for the block: every insert into it fails, as with a broken database."""
    async with sessions() as session, session.begin():
        await session.execute(text("ALTER TABLE inbox_updates RENAME TO inbox_updates_away"))
    try:
        yield
    finally:
        async with sessions() as session, session.begin():
            await session.execute(text("ALTER TABLE inbox_updates_away RENAME TO inbox_updates"))


async def eventually(condition: Callable[[], Any], seconds: float = 10.0) -> None:
    """Wait until `condition()` (sync or async) is true."""
    for _ in range(int(seconds / 0.02)):
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


@asynccontextmanager
async def slow_commit_of_inbox_rows(
    sessions: async_sessionmaker[AsyncSession], *, seconds: float, refuse: str | None = None
) -> AsyncIterator[None]:
    """PostgreSQL only: committing an inbox row takes `seconds` (a deferred constraint trigger), and
    fails when its JSON contains `refuse`, after the statement itself succeeded."""
    check = f"IF NEW.payload::text LIKE '%{refuse}%' THEN RAISE EXCEPTION 'commit refused'; END IF;"
    statements = [
        "CREATE FUNCTION inbox_commit_hook() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"PERFORM pg_sleep({seconds}); {check if refuse else ''} RETURN NULL; END $$",
        "CREATE CONSTRAINT TRIGGER inbox_commit_hook AFTER INSERT ON inbox_updates "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION inbox_commit_hook()",
    ]
    async with sessions() as session, session.begin():
        for statement in statements:
            await session.execute(text(statement))
    try:
        yield
    finally:
        async with sessions() as session, session.begin():
            await session.execute(text("DROP TRIGGER inbox_commit_hook ON inbox_updates"))
            await session.execute(text("DROP FUNCTION inbox_commit_hook()"))
