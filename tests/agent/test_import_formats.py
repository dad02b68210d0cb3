"""Reading exports: both formats from their data, the path a ChatGPT tree shows, and every bad file refused
with a clear reason."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.account.import_formats import ExportReader, ImportedConversation, ImportFileError, ReadLimits
from bench.import_data import ExportShape, write_export
from db.models.conversations import OTHER

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp()


def _read(path: Path, limits: ReadLimits | None = None) -> tuple[list[ImportedConversation], ExportReader]:
    reader = ExportReader(path, limits)
    return list(reader), reader


def _write(tmp_path: Path, document: Any, name: str = "conversations.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def _node(
    node_id: str, parent: str | None, role: str, text: str | None, at: float | None, **message: Any
) -> dict[str, Any]:
    body = None
    if text is not None:
        body = {
            "id": node_id,
            "author": {"role": role},
            "create_time": at,
            "content": message.pop("content", {"content_type": "text", "parts": [text]}),
            "metadata": message.pop("metadata", {}),
            "recipient": message.pop("recipient", "all"),
        }
    return {"id": node_id, "parent": parent, "children": [], "message": body}


def _chatgpt(
    conversation_id: str, nodes: list[dict[str, Any]], current: str | None, **extra: Any
) -> dict[str, Any]:
    mapping = {node["id"]: node for node in nodes}
    for node in nodes:
        if node["parent"] in mapping:
            mapping[node["parent"]]["children"].append(node["id"])
    return {
        "id": conversation_id,
        "title": "T",
        "create_time": T0,
        "current_node": current,
        "mapping": mapping,
        **extra,
    }


def test_chatgpt_is_the_path_to_the_current_node_without_system_tool_or_hidden_lines(tmp_path: Path) -> None:
    nodes = [
        _node("root", None, "system", None, None),
        _node("sys", "root", "system", "You are ChatGPT", T0),
        _node(
            "custom", "sys", "user", "my custom instructions", T0, metadata={"is_user_system_message": True}
        ),
        _node("u1", "custom", "user", "first question", T0 + 1),
        _node("a1-old", "u1", "assistant", "the answer regenerated away", T0 + 2),
        _node("a1", "u1", "assistant", "the answer kept", T0 + 3),
        _node("call", "a1", "assistant", "search('x')", T0 + 4, recipient="browser"),
        _node("tool", "call", "tool", "tool output", T0 + 5),
        _node(
            "hidden",
            "tool",
            "assistant",
            "hidden context",
            T0 + 6,
            metadata={"is_visually_hidden_from_conversation": True},
        ),
        _node(
            "u2",
            "hidden",
            "user",
            "look at this",
            T0 + 7,
            content={
                "content_type": "multimodal_text",
                "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                    "look at this",
                ],
            },
        ),
        _node("u2-edit", "a1", "user", "an edited prompt on another branch", T0 + 8),
    ]
    path = _write(tmp_path, [_chatgpt("c1", nodes, "u2")])

    (conversation,), reader = _read(path)

    assert reader.source == "chatgpt" and reader.skipped == 0
    assert conversation.external_id == "c1"
    assert [(m.role, m.text) for m in conversation.messages] == [
        ("user", "first question"),
        (OTHER, "the answer kept"),
        ("user", "look at this"),
    ]
    assert conversation.messages[1].sent_at == datetime.fromtimestamp(T0 + 3, UTC)


def test_a_missing_time_takes_its_neighbours_then_the_conversations_and_none_at_all_is_skipped(
    tmp_path: Path,
) -> None:
    nodes = [
        _node("u1", None, "user", "no time first", None),
        _node("a1", "u1", "assistant", "timed", T0 + 60),
        _node("u2", "a1", "user", "no time after", None),
    ]
    untimed = [_node("x", None, "user", "never dated", None)]
    path = _write(
        tmp_path,
        [
            _chatgpt("timed", nodes, "u2"),
            _chatgpt("fallback", untimed, "x"),
            _chatgpt("undated", untimed, "x", create_time=None),
        ],
    )

    conversations, reader = _read(path)

    assert [c.external_id for c in conversations] == ["timed", "fallback"]
    assert [m.sent_at for m in conversations[0].messages] == [datetime.fromtimestamp(T0 + 60, UTC)] * 3
    assert conversations[1].messages[0].sent_at == datetime.fromtimestamp(T0, UTC)
    assert reader.skipped == 1


def test_a_tree_whose_current_node_is_missing_or_points_nowhere_is_skipped_and_counted(
    tmp_path: Path,
) -> None:
    good = [_node("u", None, "user", "kept", T0)]
    cycle = [_node("p", "q", "user", "p", T0), _node("q", "p", "assistant", "q", T0 + 1)]
    path = _write(
        tmp_path,
        [
            _chatgpt("nowhere", good, "no-such-node"),
            _chatgpt("missing", good, None),
            _chatgpt("empty", [_node("root", None, "system", None, None)], "root"),
            _chatgpt("good", good, "u"),
            _chatgpt("cycle", cycle, "q"),
        ],
    )

    conversations, reader = _read(path)

    assert [c.external_id for c in conversations] == ["good", "cycle"]
    assert [m.text for m in conversations[1].messages] == ["p", "q"]  # the path ends where it closes
    assert reader.skipped == 3


def test_claude_lines_are_the_text_blocks_and_empty_conversations_are_skipped(tmp_path: Path) -> None:
    document = [
        {
            "uuid": "k1",
            "name": "Trip",
            "created_at": "2024-05-01T10:00:00Z",
            "chat_messages": [
                {
                    "uuid": "h1",
                    "sender": "human",
                    "text": "plan my trip",
                    "content": [],
                    "created_at": "2024-05-01T10:00:01.5+02:00",
                },
                {
                    "uuid": "a1",
                    "sender": "assistant",
                    "text": "ignored when content has text",
                    "content": [
                        {"type": "tool_use", "name": "web_search", "input": {}},
                        {"type": "text", "text": "Here is a plan"},
                        {"type": "tool_result", "content": []},
                    ],
                    "created_at": "2024-05-01T08:01:00Z",
                },
                {"uuid": "x", "sender": "system", "text": "not a line", "created_at": "2024-05-01T08:02:00Z"},
            ],
        },
        {"uuid": "k2", "name": "", "created_at": "2024-05-02T10:00:00Z", "chat_messages": []},
    ]
    path = _write(tmp_path, document)

    (conversation,), reader = _read(path)

    assert reader.source == "claude" and reader.skipped == 1
    assert [(m.external_id, m.role, m.text) for m in conversation.messages] == [
        ("h1", "user", "plan my trip"),
        ("a1", OTHER, "Here is a plan"),
    ]
    assert conversation.messages[0].sent_at == datetime(2024, 5, 1, 8, 0, 1, 500000, tzinfo=UTC)


def test_the_format_comes_from_the_data_and_the_zip_is_read_without_extracting(tmp_path: Path) -> None:
    zipped = write_export(tmp_path / "whatever-name.bin", "claude", ExportShape(3, 2), zipped=True)
    conversations, reader = _read(zipped)
    assert reader.source == "claude" and len(conversations) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["whatever-name.bin"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n not an export", "neither a zip nor a JSON"),
        (b"", "neither a zip nor a JSON"),
        (b'{"conversations": []}', "neither a ChatGPT nor a Claude export"),
        (b'[{"foo": 1}, {"bar": 2}, {"baz": 3}, {"mapping": {}}]', "neither a ChatGPT nor a Claude export"),
        (b'[{"foo": 1}]', "neither a ChatGPT nor a Claude export"),
        (b"[]", "holds no conversations"),
        (b'[{"uuid": "k", "chat_messages": [{"sender": "human", "te', "broken or cut short"),
        (b'[{"uuid": "k", "chat_messages": [}]', "broken or cut short"),
        (b"[" + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]", "nested more than 64 levels"),
        (b'[{"mapping": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]", "nested more than 64 levels"),
    ],
)
def test_a_bad_file_is_refused_with_its_reason(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(content)
    with pytest.raises(ImportFileError, match=reason):
        _read(path)


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
    return path


@pytest.mark.parametrize(
    "name", ["../conversations.json", "/etc/conversations.json", "a/../../b.json", "C:\\x.json"]
)
def test_a_zip_with_a_path_that_climbs_out_is_refused_whole(tmp_path: Path, name: str) -> None:
    path = _zip(tmp_path / "export.zip", {"conversations.json": b"[]", name: b"x"})
    with pytest.raises(ImportFileError, match="climb out"):
        _read(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.zip"]


def test_a_zip_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    # 64 MB of JSON whitespace compresses about a thousandfold.
    bomb = _zip(tmp_path / "bomb.zip", {"conversations.json": b"[" + b" " * 64_000_000 + b"]"})
    assert bomb.stat().st_size < 200_000
    with pytest.raises(ImportFileError, match="unpacks to far more"):
        _read(bomb)


def test_the_uncompressed_cap_is_counted_as_read(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", "claude", ExportShape(50, 4))
    with pytest.raises(ImportFileError, match="larger than this bot imports"):
        _read(path, ReadLimits(max_bytes=path.stat().st_size // 2))
    assert len(_read(path, ReadLimits(max_bytes=path.stat().st_size))[0]) == 50


def test_a_zip_without_conversations_or_damaged_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match=r"no conversations\.json"):
        _read(_zip(tmp_path / "a.zip", {"chat.html": b"<html>"}))
    good = write_export(tmp_path / "b.zip", "claude", ExportShape(20, 4), zipped=True)
    damaged = tmp_path / "c.zip"
    data = bytearray(good.read_bytes())
    data[200:400] = bytes(200)  # inside the compressed conversations
    damaged.write_bytes(bytes(data))
    with pytest.raises(ImportFileError):
        _read(damaged)
