"""Loading LoCoMo-format conversations for `bench recall`: each conversation as one user's transcript,
optionally its per-session observations as that user's facts, and a built index kept between runs.

The observations (LLM-written facts, each with the turns it comes from) stand in for what our own
extraction writes after each conversation: the `--facts` mode measures recall with facts as
retrieval units without needing a model to write them.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from alembic.script import ScriptDirectory
from sqlalchemy import update

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.memory.units import FactUnits
from agent.search import chunks, indexer
from bench.recall_beam import load_chat
from db.migrate import alembic_config
from db.models import DaySegment, TranscriptMessage, User
from db.repositories.facts import FactRepository

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_DIA = re.compile(r"D(\d+):(\d+)")
_WHOLE = re.compile(r"D\d+:\d+")
# The settings that decide what the index holds: a built index is reused only when they are equal.
INDEX_SETTINGS = (
    "search_chunk_tokens",
    "search_chunk_max_tokens",
    "search_chunk_overlap_messages",
    "search_section_tokens",
    "search_section_overlap_messages",
)


def parse_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """A turn as the bot would store it; a shared photo keeps its caption."""
    text = str(turn.get("text", ""))
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


@dataclass
class Loaded:
    """One conversation stored as a user."""

    user_id: int
    assistant_name: str
    dia_to_message: dict[str, int]
    message_session: dict[int, int]
    end: datetime
    questions: list[dict[str, Any]]


async def load_conversation(sessions: Any, sample: dict[str, Any]) -> Loaded:
    """Store one sample's sessions as one user's transcript (speaker A is the user)."""
    conversation = sample["conversation"]
    user, _ = await get_or_create_user(
        sessions,
        key=f"bench:{sample['sample_id']}",
        now=datetime(2020, 1, 1, tzinfo=UTC),
        timezone="UTC",
        name=str(conversation["speaker_a"]),
    )
    sessions_n = sorted(
        int(k.split("_")[1]) for k in conversation if re.fullmatch(r"session_\d+", k) and conversation[k]
    )
    mapping: dict[str, int] = {}
    message_session: dict[int, int] = {}
    end = datetime(2020, 1, 1, tzinfo=UTC)
    async with sessions() as session, session.begin():
        segments: dict[Any, DaySegment] = {}
        for n in sessions_n:
            start = parse_time(conversation[f"session_{n}_date_time"])
            for i, turn in enumerate(conversation[f"session_{n}"]):
                at = start + timedelta(seconds=30 * i)
                day = at.date()
                segment = segments.get(day)
                if segment is None:
                    segment = DaySegment(
                        user_id=user.id,
                        day=day,
                        timezone="UTC",
                        first_message_at=at,
                        last_message_at=at,
                        message_count=0,
                        key_moments=[],
                        messages_since_summary=0,
                        summary_due=False,
                        status="final",
                    )
                    session.add(segment)
                    await session.flush()
                    segments[day] = segment
                role = "user" if turn["speaker"] == conversation["speaker_a"] else "assistant"
                message = TranscriptMessage(
                    user_id=user.id,
                    role=role,
                    kind="text",
                    content=turn_text(turn),
                    sent_at=at,
                    day_segment_id=segment.id,
                )
                session.add(message)
                await session.flush()
                mapping[turn["dia_id"]] = message.id
                message_session[message.id] = n
                segment.last_message_at = max(segment.last_message_at, at)
                segment.message_count += 1
                end = max(end, at)
        await session.execute(update(User).where(User.id == user.id).values(last_message_at=end))
    questions = [q for q in sample["qa"] if q.get("category") in CATEGORIES]
    return Loaded(
        user.id, str(conversation["speaker_b"]), mapping, message_session, end + timedelta(days=1), questions
    )


def evidence_ids(entries: Sequence[str], mapping: dict[str, int], problems: Counter[str]) -> set[int]:
    """Message ids of the evidence turns; malformed and dangling entries are counted, not guessed."""
    ids: set[int] = set()
    for entry in entries:
        found = _DIA.findall(str(entry))
        if not _WHOLE.fullmatch(str(entry).strip()):
            problems["malformed"] += 1
        for session_n, turn_n in found:
            key = f"D{int(session_n)}:{int(turn_n)}"
            if key in mapping:
                ids.add(mapping[key])
            else:
                problems["dangling"] += 1
    return ids


def _dia_ids(value: object) -> list[str]:
    """The `D<n>:<m>` ids of an observation's source field (one id, a list, or a malformed string)."""
    values = value if isinstance(value, list) else [value]
    return [f"D{int(a)}:{int(b)}" for v in values for a, b in _DIA.findall(str(v))]


async def load_observations(sessions: Any, sample: dict[str, Any], item: Loaded) -> tuple[int, int]:
    """Store the sample's per-session observations as the user's facts, with their turns as sources.

    Both speakers' observations are stored (in LoCoMo both are people and questions ask about
    both). Returns (facts stored, source ids that point at no turn).
    """
    conversation = sample["conversation"]
    dangling = 0
    stored = 0
    observations = sample.get("observation") or {}
    for key in sorted(observations, key=lambda k: int(re.findall(r"\d+", k)[0])):
        n = int(re.findall(r"\d+", key)[0])
        at = parse_time(conversation.get(f"session_{n}_date_time", "12:00 am on 1 January, 2020"))
        facts: list[tuple[str, list[int]]] = []
        for entries in observations[key].values():
            for entry in entries:
                text, sources = str(entry[0]), _dia_ids(entry[1] if len(entry) > 1 else "")
                ids = [item.dia_to_message[d] for d in sources if d in item.dia_to_message]
                dangling += len(sources) - len(ids)
                facts.append((text, ids))
        async with sessions() as session, session.begin():
            stored += await FactRepository(session).add_sourced(
                item.user_id, None, facts, at, source="observation"
            )
    return stored, dangling


def index_key(settings: Settings, paths: Sequence[str], *, embedder: str, facts: bool, backend: str) -> str:
    """What a built index depends on: the files, the embedder, the index settings, the schema, facts."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    head = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://")).get_current_head() or ""
    # The code that decides what is stored and embedded: a change to it builds a new index (a change
    # to the ranking does not).
    code_parts = (chunks, indexer, FactUnits.index, load_conversation, load_observations, turn_text)
    for code in (*code_parts, load_chat):
        digest.update(inspect.getsource(code).encode())
    parts = [embedder, backend, str(facts), head, *(f"{n}={getattr(settings, n)}" for n in INDEX_SETTINGS)]
    digest.update("\x1f".join(parts).encode())
    return digest.hexdigest()[:16]


class IndexCache:
    """Built SQLite benchmark databases kept in a folder, by `index_key`, with what was loaded."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def restore(self, key: str, url: str) -> list[Loaded] | None:
        """Copy a kept database over the scratch one at `url`; None when none is kept."""
        database, meta = self.folder / f"{key}.db", self.folder / f"{key}.json"
        if not (database.exists() and meta.exists()):
            return None
        shutil.copyfile(database, url.split("///", 1)[1])
        items = json.loads(meta.read_text(encoding="utf-8"))
        return [
            Loaded(
                user_id=x["user_id"],
                assistant_name=x["assistant_name"],
                dia_to_message=x["dia_to_message"],
                message_session={int(k): v for k, v in x["message_session"].items()},
                end=datetime.fromisoformat(x["end"]),
                questions=x["questions"],
            )
            for x in items
        ]

    def keep(self, key: str, url: str, loaded: Sequence[Loaded]) -> None:
        """Keep the built scratch database and what was loaded into it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(url.split("///", 1)[1], self.folder / f"{key}.db")
        items = [{**asdict(x), "end": x.end.isoformat()} for x in loaded]
        (self.folder / f"{key}.json").write_text(json.dumps(items), encoding="utf-8")
