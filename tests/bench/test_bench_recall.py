"""The recall benchmark scores per turn and per session, and prints both for every system and category."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.core.settings import Settings
from bench.fakes.hashing_embedder import HashingEmbedder
from bench.recall import Scores, run_recall_bench
from bench.recall_setup import IndexCache


def test_session_recall_counts_evidence_sessions_reached_by_any_result() -> None:
    # Messages 1-3 are session 1, 4-5 session 2, 6 session 3.
    session_of = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3}
    scores = Scores()
    # Evidence: turn 2 (session 1) and turn 6 (session 3). The results hit session 1 with a
    # neighbouring turn at rank 2, and reach session 3 only at rank 7.
    scores.add(1, [4, 3, 5, 4, 5, 5, 6, 1], {2, 6}, session_of)
    # Single-session evidence (turn 5, session 2), hit exactly at rank 1.
    scores.add(2, [5, 1], {5}, session_of)

    assert scores.row([1]) == ([0.0, 0.5, 0.5], 1 / 7, 1)  # turn 6 at rank 7; turn 2 never
    assert scores.row([1], level="session") == ([0.5, 1.0, 1.0], 1 / 2, 1)  # session 3 at rank 7
    assert scores.row([2], level="session") == ([1.0, 1.0, 1.0], 1.0, 1)
    overall, mrr, n = scores.row([1, 2], level="session")
    assert (overall, mrr, n) == ([0.75, 1.0, 1.0], 0.75, 2)


def _sample() -> dict[str, object]:
    """A two-session conversation written for this test (no LoCoMo data)."""
    first = [
        ("Ann", "I adopted a grey kitten called Pebble this morning."),
        ("Bob", "Lovely! What does Pebble eat?"),
        ("Ann", "Mostly tuna, she is picky."),
    ]
    second = [
        ("Bob", "I started learning the cello last week."),
        ("Ann", "Which piece are you practising?"),
        ("Bob", "A Bach suite, slowly."),
    ]
    conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n, (turns, when) in enumerate(
        ((first, "10:00 am on 1 May, 2023"), (second, "4:00 pm on 9 June, 2023")), 1
    ):
        conversation[f"session_{n}"] = [
            {"speaker": speaker, "dia_id": f"D{n}:{i}", "text": text}
            for i, (speaker, text) in enumerate(turns, 1)
        ]
        conversation[f"session_{n}_date_time"] = when
    qa = [
        {
            "question": "What is the name of Ann's kitten?",
            "answer": "Pebble",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "Which instrument is Bob learning?",
            "answer": "cello",
            "evidence": ["D2:1"],
            "category": 4,
        },
        # The answer turns (tuna, Bach) share no word with the question; their neighbours do.
        {
            "question": "What does Pebble eat, and what is Bob practising?",
            "answer": "tuna; a Bach suite",
            "evidence": ["D1:3", "D2:3"],
            "category": 1,
        },
    ]
    return {"sample_id": "hand-made", "conversation": conversation, "qa": qa}


async def test_the_benchmark_prints_session_figures_beside_turn_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(_env_file=None, model="test", compaction_enabled=False)

    await run_recall_bench(settings, [_sample()], backend="sqlite", embedder=HashingEmbedder())

    out = capsys.readouterr().out
    assert "1 questions with evidence in more than one session" in out
    header = next(line for line in out.splitlines() if line.startswith("system"))
    assert header.split()[3:] == ["R@5", "R@10", "R@20", "MRR", "S@5", "S@10", "S@20", "SMRR"]
    rows = {
        tuple(line.split()[:3]): [float(v) for v in line.split()[-8:]]
        for line in out.splitlines()
        if line.split()[:1] in (["hybrid"], ["fts-only"], ["bm25"])
        and "latency" not in line
        and "/" not in line
    }
    labels = ["1", "2", "3", "4", "overall"]
    assert {(name, label) for name, label, _ in rows} == {
        (name, label) for name in ("hybrid", "fts-only", "bm25") for label in labels
    }
    # BM25 is computed in the run, so its rows are exact: the multi-hop question's words find the
    # neighbours of both answer turns, so no evidence turn but both evidence sessions.
    bm25 = {label: values for (name, label, _), values in rows.items() if name == "bm25"}
    assert bm25["1"] == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert bm25["4"] == [1.0] * 8
    assert bm25["overall"] == [0.667, 0.667, 0.667, 0.667, 1.0, 1.0, 1.0, 1.0]
    for (name, label, _), values in rows.items():
        if label in ("2", "3"):  # no questions of these categories
            assert values == [0.0] * 8, (name, label)
        # A result in an evidence turn is a result in that turn's session.
        assert all(s >= t for s, t in zip(values[4:], values[:4], strict=True)), (name, label)
    assert "hybrid / bm25 (S@5 S@10 S@20 SMRR)" in out


async def test_facts_mode_measures_with_the_observations_and_a_kept_index_is_reused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = Settings(_env_file=None, model="test", compaction_enabled=False)
    sample = _sample()
    # Only the observation says "pet": full text finds the kitten turn through it alone.
    sample["observation"] = {
        "session_1_observation": {"Ann": [["Ann has a pet cat named Pebble.", "D1:1"]]},
        "session_2_observation": {"Bob": [["Bob learns an instrument.", ["D2:1", "D9:9"]]]},
    }
    sample["qa"] = [{"question": "What pet does Ann have?", "evidence": ["D1:1"], "category": 4}]
    cache = IndexCache(tmp_path)

    for _ in range(2):
        await run_recall_bench(
            settings,
            [sample],
            backend="sqlite",
            embedder=HashingEmbedder(),
            facts=True,
            cache=cache,
            cache_key="k",
        )

    first, second = capsys.readouterr().out.split("conversations: ")[1:]
    assert "2 observations stored as facts (1 source ids pointing at missing turns)" in first
    assert "index reused" in second and "index reused" not in first
    for out in (first, second):
        rows = {tuple(line.split()[:2]): line.split()[4] for line in out.splitlines() if "overall" in line}
        assert rows[("fts-only", "overall")] == "0.000"  # R@5: no turn says "pet"
        assert rows[("fts+f", "overall")] == "1.000"
        assert ("hybrid+f", "overall") in rows
        # The first request of a new conversation holds the observation, in the profile; the graph's
        # tier alone holds it through the graph (when the embedded graph is installed).
        context = out.split("context: the first request of a new conversation", 1)[1].splitlines()
        shares = {
            line[:18].strip(): (re.findall(r"(\d\.\d{3}) \(\s*\d+\)", line)[-1], line.split()[-1])
            for line in context
            if line.startswith(("list, ", "graph tier")) and "facts in the request" not in line
        }
        assert shares["list, hybrid"] == ("1.000", "1.000") and shares["list, full text"] == (
            "1.000",
            "1.000",
        )
        if "graph tier alone" in shares:
            assert shares["graph tier alone"] == ("1.000", "0.000")  # through the graph, no profile
