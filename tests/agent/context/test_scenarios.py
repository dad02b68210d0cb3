"""What the model receives, end to end through `TurnService.reply` with a recording FunctionModel."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Literal

import pytest
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.context import ContextBuilder
from agent.core.clock import local_day
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.history.messages import dump_history
from agent.history.turn_notes import turn_note, words
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    GeneratedPrompt,
    HistoryCompaction,
    TranscriptMessage,
    User,
)

pytestmark = pytest.mark.both_databases

counter = get_counter()


class Recorder:
    """Records each request (messages and instructions) and answers from a script or an echo."""

    def __init__(self, answers: dict[str, str] | None = None, *, answer_words: int = 0) -> None:
        self.calls: list[tuple[list[ModelMessage], str]] = []
        self.answers = answers or {}
        self.answer_words = answer_words

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The context the model reads: the instructions and this turn's note.
        self.calls.append((list(messages), f"{info.instructions or ''}\n\n{turn_note(messages[-1])}"))
        prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
        if prompt in self.answers:
            return ModelResponse(parts=[TextPart(self.answers[prompt])])
        filler = " ".join(["and that reminds me of the river walk"] * (self.answer_words // 8))
        return ModelResponse(parts=[TextPart(f"echo: {prompt[:40]} {filler}".strip())])

    @property
    def instructions(self) -> str:
        return self.calls[-1][1]

    def history_texts(self, call: int = -1) -> list[str]:
        """Texts of the messages before the current prompt, in order."""
        messages, _ = self.calls[call]
        out = []
        for m in messages[:-1]:
            for p in m.parts:
                if isinstance(p, UserPromptPart):
                    out.append(words(p))
                elif isinstance(p, TextPart):
                    out.append(p.content)
        return out


class Summariser:
    """A summary model stand-in that records how often it is asked."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
        self.prompts.append(prompt)
        return ModelResponse(parts=[TextPart(f"SUMMARY #{len(self.prompts)}: they talked about rivers.")])


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


def make_service(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    recorder: Recorder,
    summariser: Summariser | None = None,
) -> TurnService:
    builder = ContextBuilder(settings, summary_model=FunctionModel(summariser or Summariser()))
    return TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=FunctionModel(recorder),
        context_builder=builder,
    )


async def new_user(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, **profile: object) -> int:
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana")
    if profile:
        async with sessions() as session, session.begin():
            stored = await session.get(type(user), user.id)
            assert stored is not None
            stored.profile = dict(profile)
    return user.id


async def latest_snapshot(sessions: async_sessionmaker[AsyncSession]) -> dict[str, object]:
    async with sessions() as session:
        row = (
            await session.execute(select(GeneratedPrompt).order_by(GeneratedPrompt.id.desc()).limit(1))
        ).scalar_one()
    return dict(row.context_snapshot)


async def post_process(
    sessions: async_sessionmaker[AsyncSession], user_id: int, day: date, summary: str
) -> None:
    """What post-processing leaves behind: the closed conversation summarised, the day summarised."""
    async with sessions() as session, session.begin():
        await session.execute(
            update(Conversation)
            # The idle session was closed (close_idle_conversations) and then processed.
            .where(Conversation.user_id == user_id, Conversation.status.in_(["active", "closed"]))
            .values(
                status="processed",
                ended_at=Conversation.last_message_at,
                summary=f"They told Nikita: {summary}",
            )
        )
        await session.execute(
            update(DaySegment)
            .where(DaySegment.user_id == user_id, DaySegment.day == day)
            .values(
                summary=f"## Summary\n{summary}\n\n## Open loops\n- the exam result",
                key_moments=["passed the driving theory", {"text": "adopted a cat named Miso"}],
            )
        )


async def test_yes_after_a_question_and_why_after_a_statement_carry_the_turn(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder(
        {
            "I'm bored": "Want to try the new climbing gym on Saturday?",
            "maybe later": "Honestly, I think Berlin is overrated.",
        }
    )
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock, interests="climbing, films", boundaries="no politics")
    await service.reply(Incoming(owner=user_id, text="I'm bored", sent_at=clock.now()))
    assert words(recorder.calls[0][0][0].parts[0]) == "I'm bored"  # type: ignore[arg-type]
    await service.reply(Incoming(owner=user_id, text="yes", sent_at=clock.now() + timedelta(minutes=1)))
    texts = recorder.history_texts()
    assert texts[-1] == "Want to try the new climbing gym on Saturday?"
    assert "Interests: climbing, films" in recorder.instructions
    assert "Boundaries: no politics" in recorder.instructions
    await service.reply(
        Incoming(owner=user_id, text="maybe later", sent_at=clock.now() + timedelta(minutes=2))
    )
    await service.reply(Incoming(owner=user_id, text="why?", sent_at=clock.now() + timedelta(minutes=3)))
    assert recorder.history_texts()[-1] == "Honestly, I think Berlin is overrated."
    snapshot = await latest_snapshot(sessions)
    assert snapshot["message_history_count"] == 6
    assert snapshot["message_history_tokens"] == counter.count_messages(recorder.calls[-1][0][:-1])


async def test_same_day_return_after_three_hours_sees_today(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock)
    start = clock.now()
    await service.reply(Incoming(owner=user_id, text="exam at noon, wish me luck", sent_at=start))
    await service.reply(Incoming(owner=user_id, text="ok bye", sent_at=start + timedelta(minutes=2)))
    await post_process(sessions, user_id, local_day(start, "UTC"), "Ana has a maths exam at noon.")
    result = await service.reply(Incoming(owner=user_id, text="I'm back", sent_at=start + timedelta(hours=3)))
    assert result.new_conversation
    text = recorder.instructions
    # The stored summary's Markdown headings arrive neutralised inside the tier's fence.
    summary = "\\## Summary\nAna has a maths exam at noon.\n\n\\## Open loops"
    assert f"<earlier_today>\nEarlier today:\n{summary}" in text
    assert "adopted a cat named Miso" in text and "passed the driving theory" in text
    assert "Last time we talked" not in text
    assert "they last wrote 3 hours ago" in text and "It's Tuesday afternoon" in text
    assert recorder.history_texts() == []  # a new conversation starts without message history
    snapshot = await latest_snapshot(sessions)
    assert snapshot["today_summary_present"] is True
    assert snapshot["last_conversation_present"] is False


async def test_return_after_thirty_hours_sees_the_last_conversation_not_today(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock)
    start = clock.now()
    await service.reply(Incoming(owner=user_id, text="my sister visits this weekend", sent_at=start))
    await post_process(sessions, user_id, local_day(start, "UTC"), "Ana's sister visits this weekend.")
    await service.reply(Incoming(owner=user_id, text="hey again", sent_at=start + timedelta(hours=30)))
    text = recorder.instructions
    assert "Last time we talked (30 hours ago):\nThey told Nikita: Ana's sister visits this weekend." in text
    assert "Earlier today" not in text
    assert "Yesterday:\nAna's sister visits this weekend." in text  # only the Summary section
    assert "Open loops" not in text
    assert "It's Wednesday afternoon" in text
    snapshot = await latest_snapshot(sessions)
    assert snapshot["last_conversation_present"] is True
    assert snapshot["today_summary_present"] is False


async def test_six_open_threads_surface_as_the_right_five_in_order(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock)
    now = clock.now()
    threads = [  # (type, content, age in days) -> score = priority x recency
        ("promise", "stale promise to send the recipe", 10),  # 10 x 0.5 = 5: left out
        ("topic", "the film they both liked", 0),  # 4 x 10 = 40
        ("curiosity", "how the cat settles in", 6),  # 7 x 2.29 = 16
        ("question", "whether the exam went well", 3),  # 10 x 6.14 = 61
        ("curiosity", "what the new job is like", 0),  # 7 x 10 = 70
        ("promise", "Nikita promised a playlist", 0),  # 10 x 10 = 100
    ]
    async with sessions() as session, session.begin():
        for i, (kind, content, age) in enumerate(threads):
            session.add(
                ConversationThread(
                    user_id=user_id,
                    type=kind,
                    content=content,
                    status="open",
                    dedupe_key=f"t{i}",
                    created_at=now - timedelta(days=age, minutes=i),
                )
            )
        session.add(
            ConversationThread(
                user_id=user_id,
                type="promise",
                content="already resolved",
                status="resolved",
                dedupe_key="r",
                created_at=now,
            )
        )
    await service.reply(Incoming(owner=user_id, text="hi", sent_at=now))
    section = recorder.instructions.split("Unfinished topics:\n", 1)[1].split("\n</unfinished_topics>", 1)[0]
    assert section.splitlines() == [
        "- (promise, today) Nikita promised a playlist",
        "- (curiosity, today) what the new job is like",
        "- (question, 3 days ago) whether the exam went well",
        "- (topic, today) the film they both liked",
        "- (curiosity, 6 days ago) how the cat settles in",
    ]
    snapshot = await latest_snapshot(sessions)
    assert snapshot["open_threads_count"] == 5


async def test_five_hundred_long_messages_stay_within_budgets(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder(answer_words=120)
    summariser = Summariser()
    service = make_service(settings, engine, sessions, clock, recorder, summariser)
    user_id = await new_user(sessions, clock)
    start = clock.now()
    long = " ".join(["I keep thinking about the river and the old bridge near home"] * 12)
    answer = " ".join(["and that reminds me of the river walk"] * 15)
    # 440 exchanges stored as the turn loop stores them (running them all would take minutes: the
    # stored history is rewritten on every turn), then the last 60 of the 500 through reply().
    seeded: list[ModelMessage] = []
    for i in range(440):
        at = start + timedelta(seconds=40 * i)
        seeded += [
            ModelRequest(parts=[UserPromptPart(f"{i}: {long}", timestamp=at)]),
            ModelResponse(parts=[TextPart(f"echo {i}: {answer}")], timestamp=at),
        ]
    last = start + timedelta(seconds=40 * 439)
    async with sessions() as session, session.begin():
        session.add(
            Conversation(
                user_id=user_id,
                status="active",
                started_at=start,
                last_message_at=last,
                messages=dump_history(seeded),
                message_count=880,
            )
        )
        await session.execute(update(User).where(User.id == user_id).values(last_message_at=last))
    for i in range(440, 500):
        await service.reply(
            Incoming(owner=user_id, text=f"{i}: {long}", sent_at=start + timedelta(seconds=40 * i))
        )
    async with sessions() as session:
        snapshots = [
            r.context_snapshot
            for r in (await session.execute(select(GeneratedPrompt).order_by(GeneratedPrompt.id))).scalars()
        ]
        conversation = (await session.execute(select(Conversation))).scalar_one()
        compactions = (await session.execute(select(HistoryCompaction))).scalars().all()
    assert len(snapshots) == 60
    assert len(conversation.messages) == 1000  # the stored history is never compacted
    for snap in snapshots:
        assert snap["message_history_tokens"] <= settings.history_token_budget
        assert snap["total_tokens"] <= settings.context_hard_cap
        # The total budget bounds the conversation's package and the turn's note; the history has its own.
        assert snap["instructions_tokens"] <= settings.context_total_budget
    for messages, instructions in recorder.calls:
        assert (
            counter.count_messages(messages[:-1]) + counter.count(instructions) <= settings.context_hard_cap
        )
    # Compaction replaced older turns with one tagged summary, cached rather than redone every turn.
    last_messages = recorder.calls[-1][0]
    summaries = [p for m in last_messages for p in m.parts if isinstance(p, CompactionPart)]
    assert len(summaries) == 1 and (summaries[0].content or "").startswith("SUMMARY #")
    assert compactions and len(summariser.prompts) == len(compactions) < 60 // 3
    statuses = {s["history"]["compaction"]["status"] for s in snapshots}
    assert {"new", "cached"} <= statuses
    # Each new summary folds the previous one in (incremental, never the whole session again).
    assert all("Previous summary:\nSUMMARY #" in p for p in summariser.prompts[1:])
    assert re.search(r"^499: ", words(last_messages[-1].parts[-1]))  # type: ignore[arg-type]


def today_tier(instructions: str) -> str:
    """The today tier's block in the instructions ("" when there is none)."""
    found = re.search(r"<earlier_today>\nEarlier today:\n(.*?)</earlier_today>", instructions, re.S)
    return found.group(1) if found else ""


@pytest.mark.parametrize("context_engine", ["v1", "v2", "shadow"])
async def test_a_return_before_post_processing_finds_the_earlier_turns_in_the_instructions(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    context_engine: Literal["v1", "v2", "shadow"],
) -> None:
    # No briefing covers a conversation post-processing has not seen: every engine serves v1 here.
    settings.context_engine = context_engine
    recorder = Recorder({"and my cat Miso is sick": "Oh no, poor Miso. I hope the vet helps."})
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock)
    start = clock.now()
    await service.reply(Incoming(owner=user_id, text="I have a job interview on Thursday", sent_at=start))
    await service.reply(
        Incoming(owner=user_id, text="and my cat Miso is sick", sent_at=start + timedelta(minutes=1))
    )
    # 17 minutes after the last message: the pause closed that conversation, and post-processing
    # has not run, so there is no summary of it yet.
    back = await service.reply(
        Incoming(owner=user_id, text="I'm back", sent_at=start + timedelta(minutes=18))
    )
    assert back.new_conversation
    assert recorder.history_texts() == []  # nothing of it in message_history...
    today = today_tier(recorder.instructions)
    # ...but every turn of it in the today tier, in order, quoted like every tier.
    assert "Not in the summary yet, from today's earlier conversation:" in today
    lines = [line for line in today.splitlines() if line[:2].isdigit()]
    assert lines == [
        "09:00 User: I have a job interview on Thursday",
        "09:00 You: echo: I have a job interview on Thursday",
        "09:01 User: and my cat Miso is sick",
        "09:01 You: Oh no, poor Miso. I hope the vet helps.",
    ]
    assert "I'm back" not in today  # the current conversation is the history's, not the tier's
    engine_entry = (await latest_snapshot(sessions))["engine"]
    assert isinstance(engine_entry, dict) and engine_entry["served"] == "v1"
    assert engine_entry.get("reason") == (None if context_engine == "v1" else "no briefing yet")

    # Post-processing summarises the day up to the last message of that conversation: the raw
    # turns give way to the summary, and only what came after it stays raw.
    async with sessions() as session, session.begin():
        segment = (
            await session.execute(select(DaySegment).where(DaySegment.user_id == user_id))
        ).scalar_one()
        first = (await session.execute(select(Conversation).order_by(Conversation.id).limit(1))).scalar_one()
        segment.summary = "## Summary\nAna has a job interview on Thursday; her cat Miso is sick."
        segment.last_summarized_message_id = await session.scalar(
            select(func.max(TranscriptMessage.id)).where(TranscriptMessage.conversation_id == first.id)
        )
        segment.summary_updated_at = start + timedelta(minutes=20)
    await service.reply(Incoming(owner=user_id, text="still here", sent_at=start + timedelta(minutes=40)))
    today = today_tier(recorder.instructions)
    assert "her cat Miso is sick" in today
    assert "job interview on Thursday\n" not in today and "User: and my cat" not in today
    assert [line for line in today.splitlines() if line[:2].isdigit()] == [
        "09:18 User: I'm back",
        "09:18 You: echo: I'm back",
    ]


async def test_the_raw_window_keeps_the_newest_turns_within_the_today_budget(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    service = make_service(settings, engine, sessions, clock, recorder)
    user_id = await new_user(sessions, clock)
    start = clock.now()
    for n in range(40):
        words = " ".join(f"word{n}x{k}" for k in range(30))
        await service.reply(
            Incoming(owner=user_id, text=f"message {n}: {words}", sent_at=start + timedelta(seconds=20 * n))
        )
    await service.reply(Incoming(owner=user_id, text="back again", sent_at=start + timedelta(hours=1)))
    today = today_tier(recorder.instructions)
    assert "message 39:" in today and "message 0:" not in today
    assert counter.count(today) <= settings.context_today_budget + 20  # the tag and heading aside
    snapshot = await latest_snapshot(sessions)
    assert snapshot["today_summary_present"] is True
