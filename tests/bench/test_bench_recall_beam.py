"""`bench recall` reads BEAM's chat folders: sessions at their anchors, sources mapped, abilities kept."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agent.core.settings import Settings
from bench.fakes.hashing_embedder import HashingEmbedder
from bench.recall import run_recall_bench
from bench.recall_beam import chat_folders, load_chat
from bench.recall_setup import evidence_ids, parse_time


def _write_chat(folder: Path) -> None:
    """A two-batch chat in BEAM's shape, written for this test (no BEAM data)."""
    batches = [
        {
            "batch_number": 1,
            "turns": [
                [
                    {
                        "role": "user",
                        "id": 0,
                        "time_anchor": "March-15-2024",
                        "index": "1,1",
                        "content": "Always answer me in bullet points, please. ->-> 1,1",
                    },
                    {"role": "assistant", "id": 1, "content": "Sure, bullet points from now on."},
                ],
                [
                    {
                        "role": "user",
                        "id": 2,
                        "index": "1,2",
                        "content": "My sprint ends on March 29. ->-> 1,2",
                    },
                    {"role": "assistant", "id": 3, "content": "Noted: sprint one ends March 29."},
                ],
            ],
        },
        {
            "batch_number": 2,
            "turns": [
                [
                    {
                        "role": "user",
                        "id": 4,
                        "time_anchor": "April-05-2024",
                        "content": "The dashboard API now answers in 250ms.",
                    },
                    {"role": "assistant", "id": 5, "content": "Caching paid off."},
                ]
            ],
        },
    ]
    questions = {
        "instruction_following": [{"question": "How should my answers look?", "source_chat_ids": [0]}],
        "information_extraction": [{"question": "When does my sprint end?", "source_chat_ids": [2, 3]}],
        "knowledge_update": [
            {
                "question": "How fast is the dashboard API?",
                "source_chat_ids": {"original_info": [2], "updated_info": [4, 99]},
            }
        ],
        "abstention": [{"question": "What is my cat called?", "source_chat_ids": None}],
    }
    (folder / "probing_questions").mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(batches), encoding="utf-8")
    (folder / "probing_questions" / "probing_questions.json").write_text(
        json.dumps(questions), encoding="utf-8"
    )


def test_a_beam_chat_becomes_sessions_at_their_anchors_with_sources_mapped(tmp_path: Path) -> None:
    for name in ("10", "2"):
        _write_chat(tmp_path / "100K" / name)

    folders = chat_folders([str(tmp_path / "100K")])
    sample = load_chat(folders[0])

    assert [f.name for f in folders] == ["2", "10"]
    assert chat_folders([str(tmp_path / "100K" / "10")]) == [tmp_path / "100K" / "10"]
    with pytest.raises(ValueError, match="not a BEAM chat folder"):
        chat_folders([str(tmp_path)])
    conversation = sample["conversation"]
    assert parse_time(conversation["session_1_date_time"]).date().isoformat() == "2024-03-15"
    assert parse_time(conversation["session_2_date_time"]).date().isoformat() == "2024-04-05"
    first = conversation["session_1"]
    assert [t["dia_id"] for t in first] == ["D1:0", "D1:1", "D1:2", "D1:3"]
    assert [t["speaker"] for t in first] == ["User", "Assistant", "User", "Assistant"]
    assert first[0]["text"] == "Always answer me in bullet points, please."  # BEAM's marker dropped
    by_question = {q["question"]: q for q in sample["qa"]}
    assert by_question["How fast is the dashboard API?"]["evidence"] == ["D1:2", "D2:4", "D0:99"]
    assert [(q["ability"], q["category"]) for q in sample["qa"]] == [
        ("instruction_following", 3),
        ("information_extraction", 4),
        ("knowledge_update", 4),
        ("abstention", 4),
    ]
    assert by_question["What is my cat called?"]["evidence"] == []
    # Evidence resolves through the loader's turn ids; an id no message has is counted, not guessed.
    mapping = {t["dia_id"]: i for i, t in enumerate([*first, *conversation["session_2"]], 100)}
    problems: dict[str, int] = {}
    from collections import Counter

    counted: Counter[str] = Counter(problems)
    assert evidence_ids(by_question["How fast is the dashboard API?"]["evidence"], mapping, counted) == {
        102,
        104,
    }
    assert counted["dangling"] == 1


async def test_the_benchmark_reports_beam_abilities_beside_bm25(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _write_chat(tmp_path / "1")
    settings = Settings(_env_file=None, model="test", compaction_enabled=False)

    await run_recall_bench(
        settings, [load_chat(tmp_path / "1")], backend="sqlite", embedder=HashingEmbedder()
    )

    out = capsys.readouterr().out
    table = out.split("per BEAM ability, R@10 / MRR (hybrid, fts-only, bm25)\n", 1)[1].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[:3]}
    assert set(rows) == {"information_extraction", "instruction_following", "knowledge_update"}
    # The sprint question's words are in both its source turns: BM25 finds both at the top.
    assert rows["information_extraction"][0] == "1" and rows["information_extraction"][-3:] == [
        "1.000",
        "/",
        "1.000",
    ]
    assert "1 questions without usable evidence skipped" in out  # abstention


async def test_facts_mode_learns_a_chats_facts_from_the_persons_own_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _write_chat(tmp_path / "1")
    settings = Settings(_env_file=None, model="test", compaction_enabled=False, search_summary_key_boost=0.3)

    await run_recall_bench(
        settings, [load_chat(tmp_path / "1")], backend="sqlite", embedder=HashingEmbedder(), facts=True
    )

    out = capsys.readouterr().out
    # One fact (the instruction the person gave; the assistant's echo of it teaches nothing) and the
    # demo model's summary of each of the two days.
    assert "1 facts from the demo model's extraction of 1 chats, 2 day summaries by the demo model" in out
    table = out.split("per BEAM ability, R@10 / MRR (", 1)[1].splitlines()
    assert table[0] == "hybrid, fts-only, hybrid+f, fts+f, hybrid+fo, bm25)"
