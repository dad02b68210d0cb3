"""Near duplicates without a model: what counts as the same fact, and groups formed around a keeper."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.memory.duplicates import Candidate, group_duplicates, near_duplicates, words


def _same(a: str, b: str, *, subject: tuple[str, ...] = ("ana",)) -> bool:
    return near_duplicates(words(a, subject=subject), words(b, subject=subject))


def test_the_same_words_in_another_form_are_the_same_fact() -> None:
    assert _same("Ana plays the cello.", "The user plays cello")
    assert _same("Ana’s sister lives in Porto", "Ana's sister lives in Porto!")
    assert _same("Ana likes strong green jasmine tea", "Ana likes green jasmine tea")  # 4 of 5 words


def test_a_negation_a_number_or_another_subject_makes_another_fact() -> None:
    assert not _same("Ana likes tea", "Ana doesn't like tea")
    assert not _same("Ana likes tea", "Ana does not like tea")
    assert not _same("Ana has two cats", "Ana has three cats")
    assert not _same("Ana was born in 1990", "Ana was born in 1991")
    assert not _same("Ana likes green tea", "Ana likes tea")  # 3 of 4 words: for the model to judge
    # In a group, facts are about members by name: Ana's and Ben's are never one.
    assert not _same("Ana plays the cello", "Ben plays the cello", subject=())


def test_groups_form_around_a_keeper_without_chaining() -> None:
    a = Candidate(1, frozenset("a b c d e".split()), pinned=False, reinforced=1)
    b = Candidate(2, frozenset("a b c d e f".split()), pinned=False, reinforced=1)
    c = Candidate(3, frozenset("a b c d e f g".split()), pinned=False, reinforced=1)
    pinned = Candidate(4, frozenset("a b c d e".split()), pinned=True, reinforced=1)

    groups = group_duplicates([a, b, c, pinned])

    # The pinned one keeps first and gathers its near duplicates (a: same words, b: 5 of 6); c is
    # like b (6 of 7) but only 5 of 7 like the keeper, so it stays apart.
    assert [(keeper.id, [o.id for o in others]) for keeper, others in groups] == [(4, [2, 1])]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.frozensets(st.sampled_from("abcdefgh"), min_size=1, max_size=6), min_size=1, max_size=25))
def test_the_index_finds_what_comparing_every_pair_finds(sets: list[frozenset[str]]) -> None:
    candidates = [Candidate(i, s, pinned=False, reinforced=1) for i, s in enumerate(sets)]

    groups = group_duplicates(candidates)

    # Every gathered fact is a near duplicate of its keeper, and no two keepers left apart are.
    for keeper, others in groups:
        assert all(near_duplicates(keeper.words, o.words) for o in others)
    gathered = {o.id for _, others in groups for o in others}
    keepers = [c for c in candidates if c.id not in gathered]
    for x, y in itertools.combinations(keepers, 2):
        assert not near_duplicates(x.words, y.words)
