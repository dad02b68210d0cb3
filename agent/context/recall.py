"""The facts tier's seam under the names it had (`agent/context/facts.py` is its home): kept only for
bench/recall_graph.py and bench/recall_context.py until they import the new names."""

from __future__ import annotations

from agent.context.facts import FactLimits, FunctionFacts, MessageFacts

RecallSource = MessageFacts
RecallLimits = FactLimits
FunctionRecall = FunctionFacts

__all__ = ["FunctionRecall", "RecallLimits", "RecallSource"]
