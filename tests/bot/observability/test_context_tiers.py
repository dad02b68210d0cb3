"""Each tier of a turn's context is a span of its own, started and ended as the tier is collected: a
slow tier is a long span inside the `context` span, the others short ones beside it, with the tokens
each tier got and no text of the message or the memory."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import pytest

from agent.account.users import get_or_create_user
from agent.context.builder import ContextBuilder
from agent.context.facts import FactLimits, FunctionFacts
from agent.core import observability
from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from bench.fakes.otlp_receiver import FakeCollector

SECRET = "plum pudding at grandma's on the 14th"


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        try:
            yield fake
        finally:
            shutdown()


async def _slow_recall(user_id: int, query: str, limits: FactLimits, now: datetime) -> Sequence[str]:
    """The recall tier's source, slow on purpose: the facts come once every other tier collected is in."""
    with observability.span("recall lookup"):
        # The database's collections, one after another in one task started beside this one.
        others = [task for task in asyncio.all_tasks() if task.get_name() == "context tiers"]
        assert len(others) == 1
        await asyncio.wait(others)
    return [f"- They are bringing {SECRET}."]


async def test_a_slow_tier_is_a_long_span_within_the_context_span(
    collector: FakeCollector, settings_factory: Callable[..., Settings], sessions: Any, clock: Any
) -> None:
    # The slow tier waits for the others however long they take: no timeout cuts it short.
    settings = settings_factory(
        otel_exporter_otlp_endpoint=collector.endpoint, embedder="none", context_facts_timeout_seconds=60
    )
    assert configure(settings)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    builder = ContextBuilder(settings, facts=FunctionFacts(_slow_recall))
    built = await builder.build(
        sessions,
        user=user,
        conversation=None,
        text=f"Remember {SECRET}",
        now=clock.now(),
        previous_message_at=None,
    )
    assert SECRET in built.text  # the slow tier made it into the context
    shutdown()

    context = collector.wait_for_span("context")
    spans = collector.trace(context.trace_id)
    tiers = {s.attributes["nikita.tier.name"]: s for s in spans if s.name.startswith("context tier ")}
    assert {"time", "profile", "today", "yesterday", "threads", "memory", "week"} <= set(tiers)
    for name, tier in tiers.items():
        assert tier.parent_id == context.span_id, name
        assert context.start_ns <= tier.start_ns <= tier.end_ns <= context.end_ns, name
        assert tier.attributes["nikita.tier.status"] in ("ok", "empty"), name
    memory = tiers["memory"]
    assert memory.attributes["nikita.tier.status"] == "ok"
    # A real span, current while the tier is collected: the source's own work is its child, within it,
    # and the time tier, collected after the others, starts after the slow one ended.
    [lookup] = collector.named("recall lookup")
    assert lookup.parent_id == memory.span_id
    assert memory.start_ns <= lookup.start_ns <= lookup.end_ns <= memory.end_ns
    assert tiers["time"].start_ns >= memory.end_ns
    assert memory.attributes["nikita.tier.tokens"] > 0
    assert memory.attributes["nikita.tier.tokens"] == built.snapshot["tiers"]["memory"]["tokens"]
    # The tiers ran concurrently: the slow one began before the quick ones ended, and they began
    # before it ended; its span lasts until its facts came, after the others were in.
    quick = [t for name, t in tiers.items() if name not in ("memory", "profile", "time")]
    assert len(quick) >= 5
    for tier in quick:
        assert tier.start_ns <= memory.end_ns and memory.start_ns <= tier.end_ns <= memory.end_ns
    assert tiers["time"].attributes["nikita.tier.tokens"] > 0
    # Ids, counts and timings only: neither the message nor the fact the memory gave is in a span.
    assert not [s.name for s in spans if "plum pudding" in " ".join(map(str, s.attributes.values()))]
