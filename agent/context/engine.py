"""The context engine's router and v2's assembly.

`CONTEXT_ENGINE` picks how a turn's context is made: `v1` renders the package as tiers; `v2` serves
the stored briefing (agent/context/briefing/writer.py); `shadow` serves v1 and records what v2 would have
been beside it; `canary` serves v2 to `CONTEXT_ENGINE_CANARY_PERCENT` of users, the same users on
every turn (a hash of the user id), and v1 to the others. v2 falls back to v1, with the reason in
the snapshot, whenever the briefing is missing or stale.

v2's instructions: the static persona and rules, then the briefing (fenced, neutralised: quoted
notes) as the conversation's package; the live parts (the time, and the facts found for this message,
quoted like every tier) go in the turn's note after the history, as v1's do
(agent/context/layers.py). Everything is fitted to the same budgets as v1.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage

from agent.context.budget import Budgets
from agent.context.layers import Layered, fit_layers
from agent.context.package import ContextPackage
from agent.context.reads import Collected
from agent.context.tiers import TierBlock
from agent.core.settings import ContextSettings
from agent.core.tokens import TokenCounter
from db.repositories.briefings import StoredBriefing

Route = Literal["v1", "v2", "shadow"]
Variant = Literal["text", "voice"]


def canary_bucket(user_id: int) -> int:
    """The user's place among 100 buckets: the same on every turn and in every process."""
    digest = hashlib.sha256(f"context-canary:{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def route_for(settings: ContextSettings, user_id: int) -> Route:
    """Which engine this user's turns go to under the configured CONTEXT_ENGINE."""
    if settings.context_engine == "canary":
        return "v2" if canary_bucket(user_id) < settings.context_engine_canary_percent else "v1"
    return settings.context_engine


def unusable(briefing: StoredBriefing | None, stamp: str) -> str | None:
    """Why the briefing cannot serve a turn whose package has fingerprint `stamp` (None when it can)."""
    if briefing is None:
        return "no briefing yet"
    if briefing.fingerprint != stamp:
        return "stale: the package changed since the briefing was written"
    return None


def briefing_block(briefing: StoredBriefing, variant: Variant) -> TierBlock:
    """The briefing as a tier: its own fence, its text neutralised like every stored text."""
    text = briefing.voice if variant == "voice" else briefing.text
    items = tuple(line for line in text.splitlines() if line.strip())
    return TierBlock("briefing", "Your briefing for this conversation (your own notes):", items)


def assemble_v2(
    briefing: StoredBriefing,
    package: ContextPackage,
    *,
    time: TierBlock,
    history: Sequence[ModelMessage],
    variant: Variant,
    budgets: Budgets,
    counter: TokenCounter,
) -> Layered:
    """The briefing as the conversation's package, the live parts in the turn's note, fitted like v1."""
    live = [time, *([package.facts.value] if package.facts.value is not None else [])]
    return fit_layers(
        [briefing_block(briefing, variant)], {}, live, history, budgets=budgets, counter=counter
    )


def summary(layered: Layered) -> dict[str, Any]:
    """Tokens and sections of one engine's result, for the snapshot."""
    fitted = layered.fitted
    return {
        "total_tokens": fitted.total_tokens,
        "instructions_tokens": fitted.text_tokens,
        "sections": list(fitted.blocks),
        "cuts": len(fitted.cuts),
    }


def briefing_facts(briefing: StoredBriefing) -> dict[str, Any]:
    """What the snapshot keeps of a briefing (not its text: /prompt reads that from the table)."""
    return {
        "written_at": briefing.written_at.isoformat(timespec="seconds"),
        "trigger": briefing.trigger,
        "text_tokens": briefing.text_tokens,
        "voice_tokens": briefing.voice_tokens,
        "checks": briefing.checks.get("checks", {}),
    }


@dataclass(frozen=True)
class Served:
    """What a turn is given, the briefing when v2 served it, and the snapshot's `engine` entry."""

    fitted: Layered
    briefing: StoredBriefing | None
    entry: dict[str, Any]


def serve(
    route: Route,
    configured: str,
    stored: Collected[StoredBriefing] | None,
    *,
    v1: Callable[[], Layered],
    v2: Callable[[StoredBriefing], Layered],
    stamp: str,
) -> Served:
    """v2 when the route and a fresh briefing allow it, else v1 (with v2 beside it under shadow)."""
    entry: dict[str, Any] = {"configured": configured, "route": route, "served": "v1"}
    briefing = stored.value if stored is not None else None
    assembled: Layered | None = None
    if route != "v1" and stored is not None:
        if briefing is not None:
            entry["briefing"] = briefing_facts(briefing)
        reason = stored.error or unusable(briefing, stamp)
        if reason is None and briefing is not None:
            assembled = v2(briefing)
            entry["v2"] = summary(assembled)
        else:
            entry["reason"] = reason
    if route == "v2" and assembled is not None:
        entry["served"] = "v2"
        return Served(assembled, briefing, entry)
    fitted = v1()
    if route == "shadow":
        entry["v1"] = summary(fitted)
    return Served(fitted, None, entry)
