"""The shapes of facts the tools see, and the policy a fact must meet to be saved."""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.errors import FactRejectedError


@dataclass(frozen=True)
class FactHit:
    """One fact found for a query: a held fact (`fact_id`) or the graph's (`fact_id` 0), and how well
    it matches (higher is better; the newest facts score 0 when the query is empty)."""

    fact_id: int
    content: str
    source: str
    created_at: str
    score: float


@dataclass(frozen=True)
class FactAdded:
    """The outcome of saving a fact: `created` is False when the same fact was already known."""

    fact_id: int
    content: str
    created: bool


def clean_fact(fact: str, *, max_chars: int) -> str:
    """The fact as it is saved (one line, single spaces); the policy of `memory_add` and `update_memory`."""
    text = " ".join(fact.split())
    if not text:
        raise FactRejectedError("fact is empty; write the fact as one short sentence")
    if len(text) > max_chars or fact.count("\n") > 1:
        raise FactRejectedError(
            f"save one short fact (at most {max_chars} characters), not a transcript excerpt"
        )
    return text
