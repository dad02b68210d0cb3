"""Ranking a person's facts for a query, the transcript's way: vectors and full text, hybrid.

score = vector_weight x cosine + lexical_weight x (the fact's lexical score / the best of this
query); a fact not embedded yet (or every fact, with the embedder off) ranks by full text alone. A
fact is a candidate when it shares a word with the query or its cosine reaches `MIN_COSINE`. Ties
go to the newer fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agent.memory.units import FactVectors, Known, KnownFact

# The cosine at which a fact sharing no word with the query still counts as about it (MiniLM and
# e5 put unrelated short sentences well below it).
MIN_COSINE = 0.3


@dataclass(frozen=True)
class Scored:
    """A fact and its score for one query."""

    fact: KnownFact
    score: float


def cosines(vectors: FactVectors, query: npt.NDArray[np.float32]) -> dict[str, float]:
    """Each embedded fact's cosine with the query vector, by the fact's digest."""
    if not vectors.rows:
        return {}
    sims = vectors.matrix @ query
    return {digest: float(sims[row]) for digest, row in vectors.rows.items()}


def rank_facts(
    known: Known,
    query: str,
    *,
    cosine: dict[str, float] | None,
    weights: tuple[float, float],
    keep: Callable[[KnownFact], bool],
    limit: int,
) -> list[Scored]:
    """The best `limit` facts `keep` lets through for the query, best first."""
    totals = known.postings.scores(query)
    best = max(totals.values(), default=0.0)
    vector_weight, lexical_weight = weights
    scored: list[Scored] = []
    for position, fact in enumerate(known.facts):
        if not keep(fact):
            continue
        lexical = totals.get(position, 0.0) / best if best else 0.0
        similar = cosine.get(fact.digest) if cosine is not None else None
        if similar is None:
            score = lexical
        elif lexical > 0 or similar >= MIN_COSINE:
            score = vector_weight * similar + lexical_weight * lexical
        else:
            continue
        if score > 0:
            scored.append(Scored(fact, round(score, 4)))
    scored.sort(key=lambda s: (-s.score, -s.fact.id))
    return scored[:limit]
