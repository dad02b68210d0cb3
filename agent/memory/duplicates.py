"""Facts that say the same thing, found without a model: the same words, or nearly.

Each fact becomes a set of normalised words: lower case, a plural or possessive `s` dropped, the
little words that carry no meaning here ("the", "is", "a") left out, and so is the subject when
it is the person themselves ("the user", their name; a group's facts keep their members' names).
Two facts are near duplicates when their sets overlap by `SIMILAR` or more (Jaccard) and they
agree on what would turn one into its opposite or another fact: their negations and numbers.
"Ana likes tea" and "Ana does not like tea", or "has two cats" and "has three cats", never merge.

Groups are formed around a keeper, never by chaining (A like B and B like C does not make A like
C): facts are taken in the order of which one should be kept (pinned, then the fuller wording,
then the most said, then the oldest), and each gathers the near duplicates not yet taken. Pairs
are found through an index of each set's rarest words (prefix filtering), so an owner with
thousands of facts costs milliseconds, not a comparison of every pair.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

SIMILAR = 0.8
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_LITTLE = frozenset(
    "a an the is are was were am be been being has have had of in on at to for with and or as by "
    "from that this it its their his her she he they them there who which also very really".split()
)
_NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot".split())
_NUMBERS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve twenty hundred thousand "
    "first second third once twice".split()
)
_SELF = frozenset({"user", "person"})


def words(text: str, *, subject: Iterable[str] = ()) -> frozenset[str]:
    """A fact's normalised words, without the person's own subject words."""
    skip = _LITTLE | _SELF | {s.lower() for s in subject}
    found: set[str] = set()
    for raw in _WORD.findall(text.lower().replace("\u2019", "'")):
        word = raw.removesuffix("'s")
        if word.endswith("n't"):
            word = "not"
        elif len(word) > 3 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if word and word not in skip:
            found.add(word)
    return frozenset(found)


def marks(tokens: frozenset[str]) -> frozenset[str]:
    """The words two near duplicates must share exactly: negations and numbers."""
    return frozenset(t for t in tokens if t in _NEGATIONS or t in _NUMBERS or any(c.isdigit() for c in t))


def near_duplicates(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two facts' words say the same thing (see the module's docstring)."""
    return bool(a and b) and marks(a) == marks(b) and _similar(a, b)


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    small, large = sorted((len(a), len(b)))
    # |a & b| / |a | b| is at most small / large: most pairs are ruled out before any set is built.
    return small >= SIMILAR * large and len(a & b) >= SIMILAR * len(a | b)


@dataclass(frozen=True)
class Candidate:
    """A fact as the grouping reads it: its id, words and what decides which one is kept."""

    id: int
    words: frozenset[str]
    pinned: bool
    reinforced: int
    marks: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "marks", marks(self.words))

    def priority(self) -> tuple[bool, int, int, int]:
        """Sort key: the fact to keep first."""
        return (not self.pinned, -len(self.words), -self.reinforced, self.id)


def group_duplicates(candidates: Sequence[Candidate]) -> list[tuple[Candidate, list[Candidate]]]:
    """Each keeper with the near duplicates it gathers (groups of two or more only)."""
    frequency = Counter(word for c in candidates for word in c.words)
    prefixes: dict[int, list[str]] = {}
    index: defaultdict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        rare = sorted(candidate.words, key=lambda w: (frequency[w], w))
        # Two sets with Jaccard >= SIMILAR share a word among each one's rarest |s| - ceil(SIMILAR*|s|) + 1.
        prefix = rare[: len(rare) - math.ceil(SIMILAR * len(rare)) + 1]
        prefixes[candidate.id] = prefix
        for word in prefix:
            index[word].append(candidate)
    taken: set[int] = set()
    groups: list[tuple[Candidate, list[Candidate]]] = []
    for keeper in sorted(candidates, key=Candidate.priority):
        if keeper.id in taken:
            continue
        taken.add(keeper.id)
        gathered: dict[int, Candidate] = {}
        for word in prefixes[keeper.id]:
            for other in index[word]:
                if other.id in taken or other.id in gathered or other.marks != keeper.marks:
                    continue
                if keeper.words and _similar(keeper.words, other.words):
                    gathered[other.id] = other
        if gathered:
            taken.update(gathered)
            groups.append((keeper, sorted(gathered.values(), key=Candidate.priority)))
    return groups
