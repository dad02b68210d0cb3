"""`python -m bot bench extraction`: what post-processing keeps of a careless extractor's facts.

Generated people (everyday templates, each with six known facts) have conversations generated in
code: they say new things, agree to what the companion proposes, restate and reword what is known,
and move house. A scripted extractor (a FunctionModel reading the real prompt) makes the mistakes
real models make: facts sourced on the companion's guesses and on its repeating back what it
remembers, on ids that are not in the conversation, on nothing at all; restatements in other
punctuation; and, for a share of rewordings and moves, no word on the known fact they touch. The
real post-processing job runs on a scratch SQLite database, with the known-facts list and without
it (EXTRACTION_KNOWN_FACTS_TOKENS=0), and the bench prints: bad facts kept, good facts kept,
duplicates left, contradictions resolved, and the input tokens the known-facts list adds to an
extraction (instructions, prompt and output schema counted with the offline tokenizer).
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import insert, select

from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.digest.extraction import KNOWN_HEADING
from bench.common import scratch_database
from db.engine import create_engine, session_factory
from db.models import Conversation, DaySegment, TranscriptMessage, User, UserFact
from db.repositories.dedupe import fact_dedupe_key, normalise_fact
from jobs.context import JobContext
from jobs.registry import run_job

START = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
CONVERSATIONS = 5
# The share of rewordings and moves the careless extractor does not relate to the known fact.
CARELESS = 0.2
_NAMES = "Ana Bo Eva Tom Mia Leo Noor Sam Ines Hugo Lena Omar Rita Yuki Ivo Zoe".split()
_CITIES = "Lisbon Porto Oslo Lyon Berlin Madrid Rome Vienna Prague Dublin Seoul Lima Quito Riga".split()
_JOBS = "nurse teacher engineer baker pilot lawyer designer farmer".split()
_PETS = "cat dog parrot rabbit turtle hamster".split()
_FOODS = "olives mushrooms sushi curry tofu cheese chocolate pasta lentils figs".split()
_THINGS = "cello piano guitar violin drums flute trumpet".split()
_LEARNING = "Spanish Japanese Arabic Finnish Greek Korean Dutch pottery chess sailing".split()
_REWORDINGS = (
    "{name} is a busy {job}",
    "{name} has a demanding job as a {job}",
    "{name} works long days as a {job}",
    "{name} is a {job} by trade",
    "{name} earns a living as a {job}",
)
_LINE = re.compile(r"^\[#(\d+) \d\d:\d\d (\w+)\] (.*)$", re.MULTILINE)
_KNOWN = re.compile(r"^- \[fact (\d+)\] (.*)$", re.MULTILINE)
_MARK = re.compile(r"\(conversation (\d+)\)")


@dataclass(frozen=True)
class Planned:
    """A fact the extractor will return, and what post-processing should make of it."""

    text: str
    cites: tuple[int, ...]  # line positions in the conversation; -1 is an id outside it
    kind: str  # good, bad, restated, reworded, moved
    agreed_in: int | None = None
    relation: str = "new"
    known: str | None = None  # the known fact it restates, rewords or replaces


@dataclass
class Scripted:
    """One generated conversation: its lines and the extractor's planned answer."""

    person: int
    lines: list[tuple[str, str]]
    planned: list[Planned]


@dataclass
class Person:
    """A generated person and what is held about them now (slot -> the fact's words)."""

    id: int
    name: str
    held: dict[str, str] = field(default_factory=dict)
    # The cities they lived in: a move goes somewhere new, so each move has one fact it replaces.
    lived: set[str] = field(default_factory=set)


def people(count: int, rng: random.Random) -> list[Person]:
    """`count` people, each with six known facts."""
    made = []
    for n in range(count):
        name = f"{_NAMES[n % len(_NAMES)]}{n}"
        held = {
            "city": f"{name} lives in {rng.choice(_CITIES)}",
            "job": f"{name} works as a {rng.choice(_JOBS)}",
            "pet": f"{name} has a {rng.choice(_PETS)} named {rng.choice(_NAMES)}",
            "food": f"{name} likes {rng.choice(_FOODS)}",
            "plays": f"{name} plays the {rng.choice(_THINGS)}",
            "sister": f"{name}'s sister {rng.choice(_NAMES)} lives in {rng.choice(_CITIES)}",
        }
        made.append(Person(n + 1, name, held, {held["city"].split()[-1]}))
    return made


def conversation(person: Person, number: int, rng: random.Random) -> Scripted:
    """One conversation of a person, and the careless extractor's answer to it."""
    name = person.name
    city = person.held["city"].split()[-1]
    learning, loved = rng.choice(_LEARNING), rng.choice(_FOODS)
    new_city = rng.choice([c for c in _CITIES if c not in person.lived])
    person.lived.add(new_city)
    guess = rng.choice(_PETS)
    instrument = person.held["plays"].split()[-1]
    job = person.held["job"].split()[-1]
    lines = [
        ("user", f"hi, it's me again (conversation {number})"),
        ("assistant", "Hello! How are you today?"),
        ("user", f"I started learning {learning} this week"),
        ("assistant", f"You must love {loved}, right?"),
        ("user", "yes, very much"),
        ("assistant", f"I bet you have a {guess} too. You live in {city} after all."),
        ("user", f"As you know, I play the {instrument}."),
        ("assistant", "Nice."),
        ("user", f"Big news: I moved to {new_city}!"),
        ("assistant", "Wow, congratulations!"),
        ("user", f"Being a {job} keeps me busy these days"),
        ("assistant", "Take care of yourself."),
    ]
    careless_move, careless_reword = rng.random() < CARELESS, rng.random() < CARELESS
    planned = [
        Planned(f"{name} is learning {learning}", (2,), "good"),
        Planned(f"{name} loves {loved}", (3,), "good", agreed_in=4),
        Planned(f"{name} has a {guess}", (5,), "bad"),  # the companion's guess
        Planned(f"{name} still lives in {city}", (5,), "bad"),  # the companion repeating what it knows
        Planned(f"{name} enjoys hiking", (-1,), "bad"),  # an id from nowhere
        Planned(f"{name} is doing well", (), "bad"),  # no source at all
        Planned(
            f"{name.lower()} plays the {instrument.upper()}!!", (6,), "restated", known=person.held["plays"]
        ),
        Planned(
            f"{name} moved to {new_city}",
            (8,),
            "moved",
            relation="new" if careless_move else "update",
            known=person.held["city"],
        ),
        Planned(
            rng.choice(_REWORDINGS).format(name=name, job=job),
            (10,),
            "reworded",
            relation="new" if careless_reword else "same",
            known=person.held["job"],
        ),
    ]
    person.held["city"] = f"{name} moved to {new_city}"
    return Scripted(person.id, lines, planned)


class CarelessExtractor:
    """Answers the extraction with the planned facts, naming known facts only when it was shown them;
    records the token counts of each extraction's input and its known-facts list."""

    def __init__(self, script: dict[int, Scripted]) -> None:
        self.script = script
        self.inputs: list[tuple[int, int]] = []  # (input tokens without the list, the list's tokens)
        self.counter = get_counter()

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        prompt = _prompt(messages)
        if "user_facts" not in tool.parameters_json_schema.get("properties", {}):
            return ModelResponse(parts=[ToolCallPart(tool.name, {"summary": "A day.", "key_moments": []})])
        request = messages[-1]
        instructions = request.instructions if isinstance(request, ModelRequest) else ""
        listed = _known_part(prompt)
        whole = self.counter.count(instructions or "") + self.counter.count(prompt)
        whole += self.counter.count(json.dumps(tool.parameters_json_schema))
        listed_tokens = self.counter.count(listed)
        self.inputs.append((whole - listed_tokens, listed_tokens))
        mark = _MARK.search(prompt)
        scripted = self.script[int(mark.group(1))] if mark else None
        facts = [] if scripted is None else [_answer(p, prompt) for p in scripted.planned]
        return ModelResponse(
            parts=[ToolCallPart(tool.name, {"user_facts": facts, "summary": "They talked.", "tone": "warm"})]
        )


def _prompt(messages: list[ModelMessage]) -> str:
    request = messages[-1]
    return "".join(str(p.content) for p in getattr(request, "parts", ()) if isinstance(p, UserPromptPart))


def _known_part(prompt: str) -> str:
    if KNOWN_HEADING not in prompt:
        return ""
    return KNOWN_HEADING + prompt.split(KNOWN_HEADING, 1)[1].split("\n\n", 1)[0] + "\n\n"


def _answer(planned: Planned, prompt: str) -> dict[str, Any]:
    ids = [int(m.group(1)) for m in _LINE.finditer(prompt)]
    known = {normalise_fact(m.group(2)): int(m.group(1)) for m in _KNOWN.finditer(prompt)}
    cites = [ids[i] if i >= 0 else ids[-1] + 10_000 for i in planned.cites]
    fact: dict[str, Any] = {"text": planned.text, "message_ids": cites}
    if planned.agreed_in is not None:
        fact["agreed_in"] = ids[planned.agreed_in]
    known_id = known.get(normalise_fact(planned.known)) if planned.known else None
    if planned.relation != "new" and known_id is not None:  # it can only name what it was shown
        fact |= {"relation": planned.relation, "known_id": known_id}
    return fact


async def _seed(
    url: str, persons: Sequence[Person], script: dict[int, Scripted], known: dict[int, dict[str, str]]
) -> None:
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(User),
            [
                {
                    "id": p.id,
                    "key": f"bench:{p.id}",
                    "name": p.name,
                    "timezone": "UTC",
                    "profile": {},
                    "created_at": START,
                }
                for p in persons
            ],
        )
        facts = [
            {
                "user_id": p.id,
                "content": text,
                "source": "extraction",
                "message_ids": [],
                "dedupe_key": fact_dedupe_key(text),
                "created_at": START,
                "last_seen_at": START,
            }
            for p in persons
            for text in known[p.id].values()
        ]
        await conn.execute(insert(UserFact), facts)
        segments, conversations, messages = [], [], []
        for number, scripted in sorted(script.items()):
            at = START + timedelta(days=number)
            segments.append(
                {
                    "id": number,
                    "user_id": scripted.person,
                    "day": at.date(),
                    "timezone": "UTC",
                    "first_message_at": at,
                    "last_message_at": at,
                    "message_count": len(scripted.lines),
                    "key_moments": [],
                    "messages_since_summary": len(scripted.lines),
                }
            )
            ended = at + timedelta(minutes=len(scripted.lines))
            conversations.append(
                {
                    "id": number,
                    "user_id": scripted.person,
                    "status": "closed",
                    "started_at": at,
                    "last_message_at": ended,
                    "ended_at": ended,
                    "messages": [],
                    "message_count": len(scripted.lines),
                    "attempts": 0,
                }
            )
            messages += [
                {
                    "user_id": scripted.person,
                    "conversation_id": number,
                    "day_segment_id": number,
                    "role": role,
                    "kind": "text",
                    "content": text,
                    "sent_at": at + timedelta(minutes=i),
                }
                for i, (role, text) in enumerate(scripted.lines)
            ]
        await conn.execute(insert(DaySegment), segments)
        await conn.execute(insert(Conversation), conversations)
        await conn.execute(insert(TranscriptMessage), messages)
    await engine.dispose()


@dataclass
class Figures:
    """What one run kept and resolved."""

    bad: tuple[int, int]
    good: tuple[int, int]
    duplicates: tuple[int, int]
    resolved: tuple[int, int]
    overhead: list[float]
    shown_tokens: list[int]


async def run_once(settings: Settings, count: int, *, seed: int = 53, url: str | None = None) -> Figures:
    """One run with these settings, on `url` (an empty migrated database) or a scratch SQLite one."""
    if url is None:
        async with scratch_database("sqlite") as scratch:
            assert scratch is not None
            return await run_once(settings, count, seed=seed, url=scratch)
    rng = random.Random(seed)
    persons = people(count, rng)
    known = {p.id: dict(p.held) for p in persons}
    script: dict[int, Scripted] = {}
    for c in range(CONVERSATIONS):
        for p in persons:
            number = c * count + p.id
            script[number] = conversation(p, number, rng)
    model = CarelessExtractor(script)
    await _seed(url, persons, script, known)
    engine = create_engine(url)
    ctx = JobContext(
        settings=settings,
        engine=engine,
        sessions=session_factory(engine),
        clock=Clock(),
        summary_model=FunctionModel(model),
        worker_id="bench",
    )
    try:
        while (await run_job("postprocess", ctx))["claimed"]:
            pass
        async with ctx.sessions() as session:
            rows = (await session.execute(select(UserFact))).scalars().all()
    finally:
        await engine.dispose()
    return _figures(rows, script, model)


def _figures(rows: Sequence[UserFact], script: dict[int, Scripted], model: CarelessExtractor) -> Figures:
    keyed = {(f.user_id, fact_dedupe_key(f.content)): f for f in rows}
    held = {key for key, f in keyed.items() if f.invalidated_at is None}
    bad, good, duplicates, moved = Counter[str](), Counter[str](), set(), Counter[str]()
    rewordings = set()
    for scripted in script.values():
        person = scripted.person
        for planned in scripted.planned:
            key = (person, fact_dedupe_key(planned.text))
            known = (person, fact_dedupe_key(planned.known or ""))
            if planned.kind == "bad":
                bad["all"] += 1
                bad["kept"] += key in keyed  # stored at all, even if replaced later
            elif planned.kind == "good":
                good["all"] += 1
                good["kept"] += key in held
            elif planned.kind in ("reworded", "restated"):
                rewordings.add(key)
                if key != known and key in held and known in held:
                    duplicates.add(key)  # two rows held for one fact
            else:
                moved["all"] += 1
                replaced, newer = keyed.get(known), keyed.get(key)
                moved["kept"] += (
                    replaced is not None and newer is not None and replaced.superseded_by == newer.id
                )
    overhead = [listed / rest for rest, listed in model.inputs if rest]
    return Figures(
        (bad["kept"], bad["all"]),
        (good["kept"], good["all"]),
        (len(duplicates), len(rewordings)),
        (moved["kept"], moved["all"]),
        overhead,
        [n for _, n in model.inputs],
    )


def _share(pair: tuple[int, int]) -> str:
    done, total = pair
    return f"{100 * done / max(total, 1):.1f} % ({done} of {total})"


def report(figures: Figures) -> list[str]:
    """The printed lines of one run."""
    mean = 100 * sum(figures.overhead) / max(len(figures.overhead), 1)
    top = 100 * max(figures.overhead, default=0.0)
    listed = sum(figures.shown_tokens) / max(len(figures.shown_tokens), 1)
    return [
        f"    bad facts kept:          {_share(figures.bad)}   (target 0 %)",
        f"    good facts kept:         {_share(figures.good)}   (target 100 %)",
        f"    duplicates left:         {_share(figures.duplicates)} of the facts restated or reworded",
        f"    contradictions resolved: {_share(figures.resolved)} of moves",
        f"    known-facts list:        {listed:.0f} tokens, +{mean:.1f} % input on average,"
        f" +{top:.1f} % at most (target at most +15 %)",
    ]


async def run_extraction_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print what post-processing kept, with the known-facts list and without it."""
    count = 8 if quick else 60
    base = settings.model_copy(update={"context_engine": "v1"})
    # A line per conversation and per dropped fact is the jobs' log, not the figures.
    for name in ("jobs", "agent.memory.grounding"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    print(
        f"extraction grounding ({count} people x {CONVERSATIONS} conversations, a careless extractor, SQLite)"
    )
    for label, tokens in (
        ("with the known-facts list", base.extraction_known_facts_tokens),
        ("without it", 0),
    ):
        figures = await run_once(base.model_copy(update={"extraction_known_facts_tokens": tokens}), count)
        print(f"  {label}:", flush=True)
        for line in report(figures):
            print(line, flush=True)
