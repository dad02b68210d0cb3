"""`python -m bot bench documents`: other people's reply latency while PDF bombs are parsed.

The real bot (python-telegram-bot against the fake Bot API, polling, on a scratch SQLite
database; with the MiniLM embedder, then without) answers three users who chat one message after
another, with a model that takes 0.05 s. First calm, then while six PDF bombs (30 pages sharing
one compressed stream of 200,000 text operators, about 7 KB each: minutes of pypdf's text
extraction) arrive from six other accounts. Printed: the chatting users' reply latency p50/p95 in
both phases, and when the bombs' honest answers came. Target: p95 under bombs within 1 s of calm.
"""

from __future__ import annotations

import asyncio
import os
import time

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from bench.common import describe, percentile, scratch_database
from bench.fakes.pdf import make_pdf_bomb
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import build_runtime

TOKEN = "123:ABC"
MODEL_SECONDS = 0.05
CHATTERS = (1, 2, 3)
BOMBERS = tuple(range(101, 107))
BOMB = make_pdf_bomb(pages=30, operators=200_000)


async def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    await asyncio.sleep(MODEL_SECONDS)
    return ModelResponse(parts=[TextPart("ok")])


async def _chat(
    tg: FakeTelegram,
    user: int,
    *,
    sent: list[int],
    rounds: int | None,
    stop: asyncio.Event,
    latencies: list[float],
) -> None:
    """One user's messages, each sent once the previous one was answered."""
    done = 0
    while (rounds is None and not stop.is_set()) or (rounds is not None and done < rounds):
        started = time.perf_counter()
        tg.user_message(user, f"message {sent[0]}", first_name=f"user{user}")
        sent[0] += 1
        await tg.wait_for_messages(sent[0], chat_id=user, timeout=120)
        latencies.append((time.perf_counter() - started) * 1000)
        done += 1


async def _phase(
    tg: FakeTelegram, sent: dict[int, list[int]], *, rounds: int | None, stop: asyncio.Event
) -> list[float]:
    latencies: list[float] = []
    await asyncio.gather(
        *(_chat(tg, u, sent=sent[u], rounds=rounds, stop=stop, latencies=latencies) for u in CHATTERS)
    )
    return latencies


async def _run(settings: Settings, *, embedder: str, rounds: int) -> None:
    async with scratch_database("sqlite") as url:
        assert url is not None
        with FakeTelegram(token=TOKEN) as tg:
            bench_settings = Settings(
                database_url=url,
                telegram_bot_token=TOKEN,
                telegram_api_base_url=tg.base_url,
                model="test",
                summary_model="test",
                onboarding_enabled=False,
                rate_limit_per_minute=0,  # the chatting users write faster than a person would
                rate_limit_per_day=0,
                embedder=embedder,
                document_parse_seconds=settings.document_parse_seconds,
                document_parse_memory_mb=settings.document_parse_memory_mb,
                document_parse_concurrency=settings.document_parse_concurrency,
                _env_file=None,
            )
            runtime = await build_runtime(
                bench_settings, model=FunctionModel(_model), migrate=False, summary_model=TestModel()
            )
            try:
                async with running(build_application(runtime, webhook=False), poll_timeout=1):
                    sent = {u: [0] for u in CHATTERS}
                    await _phase(tg, sent, rounds=2, stop=asyncio.Event())  # warm-up: not counted
                    calm = await _phase(tg, sent, rounds=rounds, stop=asyncio.Event())
                    stop = asyncio.Event()
                    started = time.monotonic()  # the clock of SentMessage.at
                    for user in BOMBERS:
                        tg.document(user, file_name="report.pdf", content=BOMB, first_name=f"user{user}")
                    chatting = asyncio.create_task(_phase(tg, sent, rounds=None, stop=stop))
                    answered = []
                    for user in BOMBERS:
                        [reply] = await tg.wait_for_messages(1, chat_id=user, timeout=600)
                        answered.append(reply.at - started)
                    stop.set()
                    under_bombs = await chatting
            finally:
                await runtime.close()
    gap = (percentile(under_bombs, 95) - percentile(calm, 95)) / 1000
    print(f"  embedder {embedder}")
    print(f"    calm          {describe(calm)}")
    print(f"    under bombs   {describe(under_bombs)}")
    print(f"    bombs answered after (s): {' '.join(f'{a:.1f}' for a in sorted(answered))}")
    print(f"    p95 under bombs - calm: {gap:+.2f} s (target: within 1 s): {'met' if gap <= 1 else 'missed'}")


async def run_documents_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the chatting users' latency calm and under six bombs, and the bombs' answer times."""
    os.environ.setdefault("PTB_TIMEDELTA", "1")
    print(
        f"other users' reply latency (model {MODEL_SECONDS * 1000:.0f} ms; {len(CHATTERS)} users chatting; "
        f"{len(BOMBERS)} bombs of {len(BOMB)} bytes; deadline {settings.document_parse_seconds:g} s, "
        f"{settings.document_parse_memory_mb} MB, {settings.document_parse_concurrency} at once)",
        flush=True,
    )
    for embedder in ("minilm", "none"):
        await _run(settings, embedder=embedder, rounds=5 if quick else 20)
