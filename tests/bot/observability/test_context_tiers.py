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
from agent.context.recall import FunctionRecall, RecallLimits
from agent.core import observability
from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from bench.fakes.otlp_receiver import FakeCollector

SECRET = "plum pudding at grandma's on the 14th"
SLOW_SECONDS = 0.4


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        try:
            yield fake
        finally:
            shutdown()


async def _slow_recall(user_id: int, query: str, limits: RecallLimits, now: datetime) -> Sequence[str]:
    """The recall tier's source, slow on purpose: the facts take SLOW_SECONDS to come."""
    with observability.span("recall lookup"):
        await asyncio.sleep(SLOW_SECONDS)
    return [f"- They are bringing {SECRET}."]


async def test_a_slow_tier_is_a_long_span_within_the_context_span(
    collector: FakeCollector, settings_factory: Callable[..., Settings], sessions: Any, clock: Any
) -> None:
    settings = settings_factory(otel_exporter_otlp_endpoint=collector.endpoint, embedder="none")
    assert configure(settings)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    builder = ContextBuilder(settings, recall=FunctionRecall(_slow_recall))
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
    assert memory.end_ns - memory.start_ns >= SLOW_SECONDS * 1e9
    assert memory.attributes["nikita.tier.status"] == "ok"
    # A real span, current while the tier is collected: the source's own work is its child, and the
    # time tier, collected after the others, starts after the slow one ended.
    assert collector.named("recall lookup")[0].parent_id == memory.span_id
    assert tiers["time"].start_ns >= memory.end_ns
    assert memory.attributes["nikita.tier.tokens"] > 0
    assert memory.attributes["nikita.tier.tokens"] == built.snapshot["tiers"]["memory"]["tokens"]
    # The tiers ran concurrently: the quick ones ended long before the slow one.
    quick = [t for name, t in tiers.items() if name not in ("memory", "profile")]
    assert all(t.end_ns - t.start_ns < (memory.end_ns - memory.start_ns) / 2 for t in quick)
    assert tiers["time"].attributes["nikita.tier.tokens"] > 0
    # Ids, counts and timings only: neither the message nor the fact the memory gave is in a span.
    assert not [s.name for s in spans if "plum pudding" in " ".join(map(str, s.attributes.values()))]
