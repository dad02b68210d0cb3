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
from sqlalchemy import select, update

from agent.account.users import get_or_create_user
from agent.core import demo
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


async def load_extracted(sessions: Any, sample: dict[str, Any], item: Loaded) -> int:
    """Store what the offline demo model's extraction learns from the person's own lines, session by
    session, as their facts with the lines as sources (for files without observations: BEAM).

    The extraction reads only the person's lines of the transcript (never the questions or their
    evidence): sentences that say who they are, what they have, prefer, want, decided or ask to be
    always or never done (agent/core/demo.py). Returns how many facts were stored.
    """
    conversation = sample["conversation"]
    stored = 0
    keys = sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:]))
    for key in keys:
        at = parse_time(conversation.get(f"{key}_date_time", "12:00 am on 1 January, 2020"))
        lines = [
            f"[#{item.dia_to_message[t['dia_id']]} {at:%H:%M} user] {' '.join(turn_text(t).split())}"
            for t in conversation[key]
            if t["speaker"] == conversation["speaker_a"] and t["dia_id"] in item.dia_to_message
        ]
        learnt = demo.extraction("\n".join(lines))["user_facts"]
        facts = [(str(f["text"]), [int(i) for i in f["message_ids"]]) for f in learnt]
        async with sessions() as session, session.begin():
            stored += await FactRepository(session).add_sourced(
                item.user_id, None, facts, at, source="extraction"
            )
    return stored


async def write_day_summaries(sessions: Any, user_id: int) -> int:
    """Write every day's summary as the offline demo model writes one from the day's transcript (an
    extractive summary of what the person said), for files that hold no summaries of ours. Returns
    how many days were summarised."""
    written = 0
    async with sessions() as session, session.begin():
        segments = (await session.execute(select(DaySegment).where(DaySegment.user_id == user_id))).scalars()
        for segment in list(segments):
            said = (
                await session.execute(
                    select(TranscriptMessage)
                    .where(TranscriptMessage.day_segment_id == segment.id)
                    .order_by(TranscriptMessage.id)
                )
            ).scalars()
            lines = [(m.id, m.sent_at, m.role, " ".join(m.content.split())) for m in said]
            if not lines:
                continue
            prompt = "Previous summary:\n\n\nNew messages:\n" + "\n".join(
                f"[#{i} {at:%H:%M} {role}] {text}" for i, at, role, text in lines
            )
            segment.summary = str(demo.day_summary(prompt)["summary"])
            segment.last_summarized_message_id = lines[-1][0]
            segment.summary_updated_at = segment.last_message_at
            written += 1
    return written


async def store_facts(
    sessions: Any, samples: Sequence[dict[str, Any]], loaded: Sequence[Loaded], *, summaries: bool
) -> str:
    """Each sample's facts: its observations, or what the demo model learns from its person's lines
    (and, with `summaries`, the demo model's day summaries); a note saying what was stored."""
    observed = [(s, x) for s, x in zip(samples, loaded, strict=True) if s.get("observation")]
    counts = [await load_observations(sessions, s, x) for s, x in observed]
    unobserved = [(s, x) for s, x in zip(samples, loaded, strict=True) if not s.get("observation")]
    extracted = [await load_extracted(sessions, s, x) for s, x in unobserved]
    days = [await write_day_summaries(sessions, x.user_id) for _, x in unobserved if summaries]
    note = (
        f"; {sum(c[0] for c in counts)} observations stored as facts "
        f"({sum(c[1] for c in counts)} source ids pointing at missing turns)"
    )
    if extracted:
        note += (
            f"; {sum(extracted)} facts from the demo model's extraction of {len(extracted)} chats, "
            f"{sum(days)} day summaries by the demo model"
        )
    return note


def index_key(settings: Settings, paths: Sequence[str], *, embedder: str, facts: bool, backend: str) -> str:
    """What a built index depends on: the files, the embedder, the index settings, the schema, facts."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    head = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://")).get_current_head() or ""
    # The code that decides what is stored and embedded: a change to it builds a new index (a change
    # to the ranking does not).
    code_parts = (chunks, indexer, FactUnits.index, load_conversation, load_observations, turn_text)
    # With facts, also what writes the facts and day summaries of files without observations.
    written = (demo, store_facts, load_extracted, write_day_summaries) if facts else ()
    for code in (*code_parts, load_chat, *written):
        digest.update(inspect.getsource(code).encode())
    parts = [embedder, backend, str(facts), head, *(f"{n}={getattr(settings, n)}" for n in INDEX_SETTINGS)]
    if facts:  # the demo model's day summaries are written only when they take part
        parts.append(f"summaries={settings.search_summary_key_boost > 0}")
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
