"""`python -m bot jobs run <name>`: one background job, once, from the command line."""

from __future__ import annotations

import contextlib
import json

from telegram import Bot

from agent.core.clock import Clock
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.graph import NullGraph
from agent.graph.setup import open_settings_graph
from agent.graph.store import GraphDataStore
from agent.search.embedders import open_embedder
from bot.delivery.touchpoints import TelegramMessenger
from bot.preflight import check_database
from db.engine import create_engine, session_factory
from db.migrate import upgrade_unless_at_head
from jobs.context import build_job_context
from jobs.registry import JOB_ALIASES, run_job

# The model settings each job calls (a job left out here is checked for both): the others run without
# a model key. Touchpoints are written by the chat model, with the summary model's compaction.
# Consolidation runs without the summary model's key too: it then merges duplicates alone.
MODELS_USED: dict[str, tuple[str, ...]] = {
    "close-idle-conversations": (),
    "imports": (),
    "forget": (),
    "consolidate": (),
    "graph": (),
    "postprocess": ("summary_model",),
    "day-summaries": ("summary_model",),
    "nightly": ("summary_model",),
    "touchpoints": ("model", "summary_model"),
    "retention": (),
    "slim-histories": (),
}


async def run_jobs_command(
    settings: Settings,
    name: str,
    *,
    conversation_id: int | None = None,
    limit: int | None = None,
    sweep: bool = False,
) -> int:
    """Run the job against DATABASE_URL (migrated first, as the bot's start does) and print its
    counts as JSON."""
    for setting in MODELS_USED.get(JOB_ALIASES.get(name, name), ("summary_model", "model")):
        build_model(getattr(settings, setting), settings, setting=setting.upper())  # a missing key: one line
    if name == "touchpoints":
        settings.require("telegram_bot_token")  # touchpoints are sent with the bot's token
    await check_database(settings)  # an unreachable database named by its host, in one line
    await upgrade_unless_at_head(settings.database_url)
    engine = create_engine(settings.database_url)
    # `graph` writes the graph's facts and `forget` finishes deleting them; the other jobs never
    # touch the graph.
    graph = (
        await open_settings_graph(
            settings,
            embedder=await open_embedder(settings),
            clock=Clock(),
        )
        if name in ("graph", "forget")
        else NullGraph()
    )
    ctx = None
    telegram = contextlib.AsyncExitStack()
    try:
        ctx = build_job_context(
            settings,
            engine,
            session_factory(engine),
            graph=None if isinstance(graph, NullGraph) else graph,
        )
        if not isinstance(graph, NullGraph):
            ctx.data_stores.append(GraphDataStore(graph))
        options: dict[str, int | bool] = {}
        if sweep:
            options["sweep"] = True
        if conversation_id is not None:
            options["conversation_id"] = conversation_id
        if limit is not None:
            options["limit"] = limit
        if name == "touchpoints" and settings.telegram_bot_token is not None:
            token = settings.telegram_bot_token.get_secret_value()
            bot = await telegram.enter_async_context(Bot(token, base_url=settings.telegram_api_base_url))
            ctx.messenger = TelegramMessenger(bot)
        counts = await run_job(name, ctx, **options)
    finally:
        await telegram.aclose()
        if ctx is not None and ctx.guard is not None:
            await ctx.guard.close()
        await graph.close()
        await engine.dispose()
    print(json.dumps({"job": name, **counts}), flush=True)
    return 0
