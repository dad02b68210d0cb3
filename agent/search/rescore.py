"""The final score of a candidate message: the hybrid base (vector and full-text scores), then the
signals measured on LoCoMo and BEAM (docs/recall.md): the previous turn's words, the speaker a
query names, the days it names, and the days whose summary it matches. Pure functions over what
the search already read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import date

from agent.search.dates import DayRange
from agent.search.turns import Role, TurnInfo


@dataclass(frozen=True)
class Signals:
    """The weights of one search (from the settings) and what its query names."""

    vector_weight: float
    lexical_weight: float
    previous_turn_weight: float
    other_speaker_factor: float
    date_boost: float
    named_role: Role | None
    days: Sequence[DayRange]
    # Days whose summary matches the query, with the summary's score relative to the best (0-1].
    summary_days: Mapping[date, float] = field(default_factory=dict)
    summary_key_boost: float = 0.0


def with_previous_turn(
    lexical: Mapping[int, float], info: Mapping[int, TurnInfo], weight: float
) -> dict[int, float]:
    """Each message's lexical score plus `weight` x its previous turn's.

    An answer rarely repeats the question's words ("Super good, rich and creamy!" after "how
    did the coconut ice cream turn out?"); the turn before it holds them.
    """
    out: dict[int, float] = {}
    for message_id, turn in info.items():
        own = lexical.get(message_id, 0.0)
        previous = lexical.get(turn.previous_id, 0.0) if turn.previous_id is not None else 0.0
        out[message_id] = own + weight * previous
    for message_id, score in lexical.items():
        out.setdefault(message_id, score)
    return out


def final_scores(
    ids: Iterable[int],
    *,
    cosine: Mapping[int, float],
    lexical: Mapping[int, float],
    info: Mapping[int, TurnInfo],
    signals: Signals,
    unembedded: AbstractSet[int] = frozenset(),
    facts: Mapping[int, float] | None = None,
) -> dict[int, float]:
    """vector x cosine + lexical x (score / best, or the message's best fact's lexical score when
    higher), then the speaker and date factors.

    A message in `unembedded` has no vector of the current model (indexed by another one, before
    `bot reindex`): its lexical part takes both weights, as in a search without embeddings.
    """
    contextual = with_previous_turn(lexical, info, signals.previous_turn_weight)
    best = max(contextual.values(), default=0.0)
    facts = facts or {}
    scores: dict[int, float] = {}
    for message_id in ids:
        lexical_part = contextual.get(message_id, 0.0) / best if best > 0 else 0.0
        lexical_part = max(lexical_part, facts.get(message_id, 0.0))
        wv, wl = signals.vector_weight, signals.lexical_weight
        if message_id in unembedded:
            score = (wv + wl) * lexical_part
        else:
            score = wv * cosine.get(message_id, 0.0) + wl * lexical_part
        turn = info.get(message_id)
        if turn is not None:
            if signals.named_role is not None and turn.role in ("user", "assistant"):
                if turn.role != signals.named_role:
                    score *= signals.other_speaker_factor
            if any(days.holds(turn.day) for days in signals.days):
                score *= 1.0 + signals.date_boost
            score *= 1.0 + signals.summary_key_boost * signals.summary_days.get(turn.day, 0.0)
        scores[message_id] = score
    return scores
