"""The context: what the model sees on every turn (docs/context.md).

`ContextBuilder.build` collects the context package (its parts concurrently), compacts a long
history, fits everything to the token budgets and returns a `BuiltContext`: the instructions text,
the history to send, the package, and a snapshot of what went in, what was cut and what failed.
Context engine v2 (`engine.py`) serves instead the briefing the summary model wrote from the package
in idle time (`briefing/writer.py`, checked by `briefing/checks.py`), while it is fresh.
"""

from __future__ import annotations

from agent.context.budget import Budgets, Cut, Fitted, fit
from agent.context.builder import BuiltContext, ContextBuilder
from agent.context.compaction import Compacted, Compactor
from agent.context.facts import FactLimits, FunctionFacts, MessageFacts, limits_for_budget
from agent.context.package import ContextPackage, PackageCollector
from agent.context.snapshot import format_snapshot
from agent.context.tiers import TierBlock, describe_gap, part_of_day

__all__ = [
    "Budgets",
    "BuiltContext",
    "Compacted",
    "Compactor",
    "ContextBuilder",
    "ContextPackage",
    "Cut",
    "FactLimits",
    "Fitted",
    "FunctionFacts",
    "MessageFacts",
    "PackageCollector",
    "TierBlock",
    "describe_gap",
    "fit",
    "format_snapshot",
    "limits_for_budget",
    "part_of_day",
]
