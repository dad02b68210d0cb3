"""The context engine end to end: a conversation, post-processing that writes the briefing, then
returns served by v2, shadow or canary, through `TurnService.reply` with recording FunctionModels."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.account.users import get_or_create_user
from agent.context import ContextBuilder, format_snapshot
from agent.context.engine import canary_bucket, route_for
from agent.core.settings import Settings
from agent.history.turn_notes import turn_note, words
from agent.reports.texts import prompt_report
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import GeneratedPrompt, User
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries
from tests.privacy import rows_of


class Recorder:
    """The chat model: records the context of each request (its instructions and the turn's note)
    and echoes the prompt."""

    def __init__(self) -> None:
        self.instructions: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(f"{info.instructions or ''}\n\n{turn_note(messages[-1])}")
        prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])


class World:
    """One user, the turn service and the jobs on one database and clock."""

    def __init__(
        self,
        settings: Settings,
        engine: AsyncEngine,
        sessions: async_sessionmaker[AsyncSession],
        clock: FrozenClock,
    ) -> None:
        self.sessions, self.clock = sessions, clock
        self.recorder, self.scripted = Recorder(), ScriptedSummaries()
        self.service = TurnService(
            settings=settings,
            engine=engine,
            sessions=sessions,
            clock=clock,
            model=FunctionModel(self.recorder),
            context_builder=ContextBuilder(settings, summary_model=FunctionModel(self.scripted)),
        )
        self.jobs = JobContext(
            settings=settings,
            engine=engine,
            sessions=sessions,
            clock=clock,
            summary_model=FunctionModel(self.scripted),
            worker_id="worker-a",
        )

    async def user(self) -> int:
        user, _ = await get_or_create_user(
            self.sessions, key="cli:ana", now=self.clock.now(), timezone="UTC", name="Ana"
        )
        return user.id

    async def talk(self, user_id: int, texts: list[str]) -> None:
        """Messages a minute apart from the clock's time on; the clock follows."""
        for text in texts:
            await self.service.reply(Incoming(owner=user_id, text=text, sent_at=self.clock.now()))
            self.clock.advance(timedelta(minutes=1))

    async def idle_and_process(self) -> None:
        """The pause closes the conversation and post-processing runs (the briefing last)."""
        self.clock.advance(timedelta(minutes=20))
        await run_job("close-idle-conversations", self.jobs)
        await run_job("postprocess", self.jobs)

    async def snapshot(self) -> dict[str, object]:
        async with self.sessions() as session:
            row = await session.scalar(select(GeneratedPrompt).order_by(GeneratedPrompt.id.desc()).limit(1))
        assert row is not None
        return dict(row.context_snapshot)


def settings_for(database_url: str, engine: str) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=database_url, model="test", summary_model="test", context_engine=engine
    )


@pytest.mark.both_databases
async def test_v2_serves_the_briefing_and_a_return_before_post_processing_gets_v1(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, database_url: str
) -> None:
    world = World(settings_for(database_url, "v2"), engine, sessions, clock)
    user_id = await world.user()
    await world.talk(user_id, ["conversation 1: my concert is on Friday", "and a job offer in Porto"])

    # Back after 17 minutes, before post-processing: no briefing yet, so v1 with the raw turns.
    clock.advance(timedelta(minutes=17))
    await world.talk(user_id, ["I'm back"])
    snapshot = await world.snapshot()
    engine_entry = snapshot["engine"]
    assert isinstance(engine_entry, dict) and engine_entry.pop("ms") >= 0
    assert engine_entry == {"configured": "v2", "route": "v2", "served": "v1", "reason": "no briefing yet"}
    assert "09:00 User: conversation 1: my concert is on Friday" in world.recorder.instructions[-1]

    await world.idle_and_process()
    # Both conversations were processed, each followed by its briefing (the second edits the first).
    assert len(world.scripted.briefing_prompts) == 2
    await world.talk(user_id, ["hi again"])
    served = world.recorder.instructions[-1]
    # The briefing, fenced as the persona's own notes, then the live time; no tier of v1.
    assert "<your_briefing>\nYour briefing for this conversation (your own notes):\n" in served
    assert "Who they are now: Ana, a cellist in Lisbon" in served
    assert "- Will she take the job in Porto?" in served
    assert served.index("</your_briefing>") < served.index("<now>\nNow:")
    assert "Earlier today:" not in served and "Unfinished topics:" not in served
    snapshot = await world.snapshot()
    entry = snapshot["engine"]
    assert isinstance(entry, dict) and entry["served"] == "v2" and "reason" not in entry
    assert entry["v2"]["sections"] == ["briefing", "time"]
    assert all(entry["briefing"]["checks"].values())
    assert "Engine: v2 served (CONTEXT_ENGINE=v2)" in format_snapshot(snapshot)

    # The next conversation closes and is not processed yet: the briefing is stale, v1 serves.
    clock.advance(timedelta(minutes=30))
    await world.talk(user_id, ["one more thing: the rehearsal is tonight"])
    clock.advance(timedelta(minutes=20))
    await world.talk(user_id, ["and now?"])
    entry = (await world.snapshot())["engine"]
    assert isinstance(entry, dict) and entry["served"] == "v1"
    assert entry["reason"] == "stale: the package changed since the briefing was written"
    assert "User: one more thing: the rehearsal is tonight" in world.recorder.instructions[-1]

    # Once processed, the new briefing serves (the turn read it: the one it held was for another package).
    world.scripted.briefing = dict(world.scripted.briefing, today="The rehearsal is tonight.")
    await world.idle_and_process()
    await world.talk(user_id, ["back once more"])
    assert "What matters today: The rehearsal is tonight." in world.recorder.instructions[-1]
    entry = (await world.snapshot())["engine"]
    assert isinstance(entry, dict) and entry["served"] == "v2"

    # Admin /prompt: which engine served and the stored briefing.
    async with sessions() as session:
        user = await session.get(User, user_id)
        assert user is not None
        user.telegram_id = 4242
        await session.commit()
    report = await prompt_report(sessions, 4242)
    assert "Engine: v2 served (CONTEXT_ENGINE=v2)" in report
    assert "Stored briefing (" in report and "What matters today: The rehearsal is tonight." in report
    assert f"Voice variant:\n{world.scripted.briefing['voice']}" in report

    # /forget: the briefing row goes with the user, and the turn's reader holds nothing of theirs.
    reader = world.service.context_builder.briefings
    assert user_id in reader._held and (await rows_of(sessions, user_id))["briefings"] == 1
    await forget_user(sessions, user_id, caches=[reader])
    assert (await rows_of(sessions, user_id)).get("briefings") == 0
    assert user_id not in reader._held


async def test_shadow_serves_v1_and_records_v2_beside_it(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, database_url: str
) -> None:
    world = World(settings_for(database_url, "shadow"), engine, sessions, clock)
    user_id = await world.user()
    await world.talk(user_id, ["conversation 1: my concert is on Friday"])
    await world.idle_and_process()
    await world.talk(user_id, ["hi again"])

    served = world.recorder.instructions[-1]
    assert "<earlier_today>\nEarlier today:" in served and "Your briefing for" not in served
    snapshot = await world.snapshot()
    entry = snapshot["engine"]
    assert isinstance(entry, dict) and (entry["served"], entry["route"]) == ("v1", "shadow")
    assert "briefing" in entry["v2"]["sections"] and "today" in entry["v1"]["sections"]
    assert entry["v1"]["total_tokens"] > 0 and entry["v2"]["total_tokens"] > 0
    assert len(entry["briefing"]["checks"]) == 7
    shown = format_snapshot(snapshot)
    assert "Engine: v1 served (CONTEXT_ENGINE=shadow)" in shown and "  v2: " in shown


def test_the_canary_takes_the_same_users_every_time() -> None:
    def routes(percent: int) -> list[str]:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None, context_engine="canary", context_engine_canary_percent=percent
        )
        return [route_for(settings, user_id) for user_id in range(1, 1001)]

    assert set(routes(0)) == {"v1"} and set(routes(100)) == {"v2"}
    thirty = routes(30)
    assert thirty == routes(30) and 250 < thirty.count("v2") < 350
    # Raising the share only adds users: everyone in the 30% canary stays in the 50% one.
    fifty = routes(50)
    assert all(b == "v2" for a, b in zip(thirty, fifty, strict=True) if a == "v2")
    assert canary_bucket(7) == canary_bucket(7)
