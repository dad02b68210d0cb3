"""The `consolidate` job on both databases: one model call per owner whose facts changed, none for
the others; paraphrases merged, a contradicted fact superseded, pinned facts kept; exactly once
across workers; a failure retried without losing a fact; never another owner's facts."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.core.demo import demo_model
from agent.core.errors import MissingModelKeyError
from agent.core.models import unavailable_model
from agent.core.settings import Settings
from agent.memory.consolidation import GROUP_NOTE
from bench.clock import FrozenClock
from db.engine import create_engine, session_factory
from db.models import Conversation, ConversationThread, FactConsolidation, ModelUsage
from db.repositories.fact_tidying import FactTidying
from db.repositories.facts import FactRepository
from db.work import dead_items
from jobs.registry import run_job
from jobs.scheduler import run_minute_jobs
from tests.jobs.conftest import seed_conversation
from tests.jobs.tidy_helpers import FACT_LINE, Tidier, held, job_context, owner, rows, say, state

pytestmark = pytest.mark.both_databases


async def test_the_same_fact_said_five_times_is_one_fact(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    for n in range(5):
        await say(sessions, ana, ["Ana is a nurse."], clock.now(), sources=[n + 1])
        clock.advance(timedelta(hours=1))
    await say(
        sessions, ana, ["Ana works as a nurse", "The user is a nurse", "Ana plays the cello"], clock.now()
    )
    assert len(await held(sessions, ana)) == 4  # the repository made the five one, reinforced
    tidier = Tidier(
        lambda shown: {
            "same": [
                {
                    "ids": [shown["Ana is a nurse."], shown["Ana works as a nurse"]],
                    "keep": shown["Ana works as a nurse"],
                }
            ]
        }
    )

    counts = await run_job("consolidate", job_context(settings, engine, sessions, clock, tidier.model()))

    assert (counts["consolidated"], counts["model_calls"], counts["merged"]) == (1, 1, 2)
    assert await held(sessions, ana) == ["Ana works as a nurse", "Ana plays the cello"]
    facts = await rows(sessions, ana)
    kept = facts["Ana works as a nurse"]
    assert kept.reinforced == 5 + 1 + 1 and kept.message_ids == [1, 2, 3, 4, 5]
    for said_again in ("Ana is a nurse.", "The user is a nurse"):
        assert facts[said_again].superseded_by == kept.id and facts[said_again].invalidated_at == clock.now()
    # "The user is a nurse" was merged without the model: its call read the rest, the count summed.
    (prompt,) = tidier.prompts
    assert "The user is a nurse" not in prompt and "said 2026-03-03, 6 times" in prompt
    async with sessions() as session:
        usage = (await session.execute(select(ModelUsage).where(ModelUsage.user_id == ana))).scalars().all()
    assert [(u.kind, u.calls) for u in usage] == [("consolidation", 1)]


async def test_lisbon_then_porto_leaves_porto_current_and_lisbon_superseded(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana lives in Lisbon"], clock.now())
    clock.advance(timedelta(days=3))
    await say(sessions, ana, ["Ana moved to Porto"], clock.now())
    tidier = Tidier(
        lambda shown: {
            "replaced": [{"older": shown["Ana lives in Lisbon"], "newer": shown["Ana moved to Porto"]}],
            "sections": [{"id": shown["Ana moved to Porto"], "section": "identity"}],
        }
    )

    counts = await run_job("consolidate", job_context(settings, engine, sessions, clock, tidier.model()))

    assert (counts["superseded"], counts["placed"]) == (1, 1)
    assert await held(sessions, ana) == ["Ana moved to Porto"]
    facts = await rows(sessions, ana)
    lisbon, porto = facts["Ana lives in Lisbon"], facts["Ana moved to Porto"]
    assert (lisbon.superseded_by, lisbon.invalidated_at) == (porto.id, clock.now())
    assert lisbon.invalid_reason == "replaced by a later fact: Ana moved to Porto"
    assert porto.category == "identity"


async def test_the_offline_demo_model_moves_them_from_lisbon_to_porto(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ctx = job_context(settings, engine, sessions, clock, demo_model())
    user_id, _ = await seed_conversation(sessions, start=clock.now(), texts=["I live in Lisbon.", "Nice!"])
    await run_minute_jobs(ctx)
    clock.advance(timedelta(days=2))
    await seed_conversation(sessions, start=clock.now(), texts=["Big news! I moved to Porto.", "Wow."])

    results = await run_minute_jobs(ctx)

    # The extraction was shown the known fact and said the move updates it: tidying has nothing left
    # to supersede, and only places the new fact.
    assert results["postprocess"]["processed"] == 1 and results["consolidate"]["superseded"] == 0
    assert await held(sessions, user_id) == ["The user moved to Porto."]
    facts = await rows(sessions, user_id)
    assert facts["The user lives in Lisbon."].superseded_by == facts["The user moved to Porto."].id
    assert facts["The user moved to Porto."].category == "identity"


async def test_no_model_is_called_for_an_owner_whose_facts_did_not_change(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    tidier = Tidier()
    ctx = job_context(settings, engine, sessions, clock, tidier.model())
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana plays the cello", "Ana lives in Lisbon"], clock.now())
    assert (await run_job("consolidate", ctx))["model_calls"] == 1
    ben = await owner(sessions, "Ben", clock.now())
    await seed_conversation(sessions, start=clock.now(), texts=["hi"], user_key="cli:ben", status="active")
    await say(sessions, ben, ["Ben runs marathons"], clock.now())
    clock.advance(timedelta(hours=2))

    # Ana's facts did not change; Ben's did, but he is still in a conversation.
    assert (await run_job("consolidate", ctx))["claimed"] == 0
    assert len(tidier.prompts) == 1
    async with sessions() as session, session.begin():
        await session.execute(update(Conversation).values(status="processed"))
    assert (await run_job("consolidate", ctx))["model_calls"] == 1
    assert "Ben runs marathons" in tidier.prompts[-1] and "Ana" not in tidier.prompts[-1]
    assert (await run_job("consolidate", ctx))["claimed"] == 0
    assert len(tidier.prompts) == 2
    # A fact learned again is a change: the next run reads the owner's facts once more.
    await say(sessions, ana, ["Ana plays the cello"], clock.now(), sources=[7])
    assert (await run_job("consolidate", ctx))["model_calls"] == 1


async def test_two_workers_consolidate_each_owner_exactly_once(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    database_url: str,
) -> None:
    owners = [await owner(sessions, f"Person{n}", clock.now()) for n in range(6)]
    for n, owner_id in enumerate(owners):
        await say(sessions, owner_id, [f"Person{n} likes tea", f"Person{n} plays chess"], clock.now())
    calls: Counter[int] = Counter()
    # Each worker's first model call waits, its owner claimed, until the other worker's first call:
    # both workers hold a claim at once, so neither can have claimed every owner alone.
    asked = {"worker-a": asyncio.Event(), "worker-b": asyncio.Event()}

    def model(worker: str, other: str) -> FunctionModel:
        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            shown = FACT_LINE.findall(str(messages[0].parts[-1].content))  # type: ignore[union-attr]
            calls[int(re.findall(r"Person(\d+)", shown[0][1])[0])] += 1
            asked[worker].set()
            await asyncio.wait_for(asked[other].wait(), 30)
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {})])

        return FunctionModel(answer)

    other_engine = create_engine(database_url)  # a second instance
    try:
        first = job_context(settings, engine, sessions, clock, model("worker-a", "worker-b"))
        second = job_context(
            settings,
            other_engine,
            session_factory(other_engine),
            clock,
            model("worker-b", "worker-a"),
            worker="worker-b",
        )
        a, b = await asyncio.gather(run_job("consolidate", first), run_job("consolidate", second))
    finally:
        await other_engine.dispose()

    assert a["claimed"] >= 1 and b["claimed"] >= 1
    assert calls == Counter(dict.fromkeys(range(6), 1))
    assert a["consolidated"] + b["consolidated"] == 6 and a["claimed"] + b["claimed"] == 6
    async with sessions() as session:
        done = (await session.execute(select(FactConsolidation))).scalars().all()
    assert all(row.consolidated_for == row.changed_at and row.lease_until is None for row in done)


async def test_a_worker_whose_lease_was_taken_over_writes_nothing(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana likes green tea", "Ana enjoys green tea"], clock.now())
    entered, go_on = asyncio.Event(), asyncio.Event()

    def merge(shown: dict[str, int]) -> dict[str, object]:
        return {"same": [{"ids": list(shown.values()), "keep": shown["Ana likes green tea"]}]}

    async def stuck(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        entered.set()
        await go_on.wait()
        shown = {w: int(i) for i, w in FACT_LINE.findall(str(messages[0].parts[-1].content))}  # type: ignore[union-attr]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, merge(shown))])

    slow = asyncio.create_task(
        run_job("consolidate", job_context(settings, engine, sessions, clock, FunctionModel(stuck)))
    )
    await entered.wait()
    clock.advance(timedelta(seconds=settings.postprocess_claim_timeout_seconds + 1))
    taking_over = job_context(settings, engine, sessions, clock, Tidier(merge).model(), worker="worker-b")
    assert (await run_job("consolidate", taking_over))["merged"] == 1
    go_on.set()

    assert (await slow)["lost"] == 1
    facts = await rows(sessions, ana)
    assert (
        await held(sessions, ana) == ["Ana likes green tea"] and facts["Ana likes green tea"].reinforced == 2
    )


async def test_a_failing_model_call_is_retried_later_and_loses_no_fact(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana lives in Lisbon"], clock.now())
    clock.advance(timedelta(days=1))
    await say(sessions, ana, ["Ana moved to Porto", "Ana is a nurse"], clock.now())
    tidier = Tidier(
        lambda shown: {
            "replaced": [{"older": shown["Ana lives in Lisbon"], "newer": shown["Ana moved to Porto"]}]
        }
    )
    tidier.fail = 1
    ctx = job_context(settings, engine, sessions, clock, tidier.model())

    assert (await run_job("consolidate", ctx))["failed"] == 1
    assert await held(sessions, ana) == ["Ana lives in Lisbon", "Ana moved to Porto", "Ana is a nurse"]
    failed = await state(sessions, ana)
    assert (failed.attempts, failed.lease_until) == (1, clock.now() + timedelta(seconds=60))
    assert failed.last_error is not None and failed.last_error.startswith("ModelHTTPError")
    assert (await run_job("consolidate", ctx))["claimed"] == 0  # waits for its retry
    clock.advance(timedelta(seconds=61))
    assert (await run_job("consolidate", ctx))["superseded"] == 1

    assert await held(sessions, ana) == ["Ana moved to Porto", "Ana is a nurse"]
    done = await state(sessions, ana)
    assert (done.attempts, done.last_error, done.lease_until) == (0, None, None)
    assert len(tidier.prompts) == 2


async def test_after_the_last_attempt_a_person_waits_for_their_next_change(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    settings = Settings(_env_file=None, database_url=database_url, postprocess_max_attempts=2)  # type: ignore[call-arg]
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana plays the cello", "Ana lives in Lisbon"], clock.now())
    tidier = Tidier()
    tidier.fail = 3
    ctx = job_context(settings, engine, sessions, clock, tidier.model())
    for _ in range(2):
        assert (await run_job("consolidate", ctx))["failed"] == 1
        clock.advance(timedelta(hours=1))
    assert (await run_job("consolidate", ctx))["claimed"] == 0  # given up
    given_up = await state(sessions, ana)
    assert (given_up.attempts, given_up.lease_until) == (2, None)
    async with sessions() as session:
        assert (await dead_items(session)).counts["tidying"] == 1

    await say(sessions, ana, ["Ana has a cat"], clock.now())
    assert (await run_job("consolidate", ctx))["failed"] == 1  # tried again, from its first attempt
    assert (await state(sessions, ana)).attempts == 1
    clock.advance(timedelta(hours=1))
    assert (await run_job("consolidate", ctx))["consolidated"] == 1
    assert await held(sessions, ana) == ["Ana plays the cello", "Ana lives in Lisbon", "Ana has a cat"]
    async with sessions() as session:
        assert (await dead_items(session)).counts["tidying"] == 0


async def test_a_pinned_fact_is_never_dropped_and_a_contradiction_is_asked(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(
        sessions,
        ana,
        ["Ana lives in Lisbon", "Ana is vegetarian", "Ana flies to Rome"],
        clock.now(),
        pinned=True,
    )
    async with sessions() as session, session.begin():
        facts = FactTidying(session)
        (rome,) = [f for f in await facts.held(ana) if "Rome" in f.content]
        await facts.place(
            ana, rome.id, clock.now(), category="plan", valid_until=clock.now() + timedelta(days=1)
        )
    clock.advance(timedelta(days=5))  # the pinned plan's date has passed
    await say(sessions, ana, ["Ana moved to Porto", "Ana doesn't eat meat"], clock.now())
    tidier = Tidier(
        lambda shown: {
            "replaced": [{"older": shown["Ana lives in Lisbon"], "newer": shown["Ana moved to Porto"]}],
            "same": [
                {
                    "ids": [shown["Ana is vegetarian"], shown["Ana doesn't eat meat"]],
                    "keep": shown["Ana doesn't eat meat"],
                }
            ],
        }
    )
    ctx = job_context(settings, engine, sessions, clock, tidier.model())

    counts = await run_job("consolidate", ctx)

    assert (counts["superseded"], counts["retired"], counts["merged"], counts["asked"]) == (0, 0, 1, 1)
    assert await held(sessions, ana) == [
        "Ana lives in Lisbon",
        "Ana is vegetarian",
        "Ana flies to Rome",
        "Ana moved to Porto",
    ]
    facts = await rows(sessions, ana)
    assert facts["Ana doesn't eat meat"].superseded_by == facts["Ana is vegetarian"].id
    async with sessions() as session:
        (question,) = (await session.execute(select(ConversationThread))).scalars().all()
    assert (question.user_id, question.type, question.status) == (ana, "question", "open")
    assert "Ana lives in Lisbon" in question.content and "Ana moved to Porto" in question.content
    # Asked once: the next tidying after another change does not ask again.
    await say(sessions, ana, ["Ana has a cat"], clock.now())
    assert (await run_job("consolidate", ctx))["asked"] == 0


async def test_an_owners_consolidation_never_touches_another_owners_facts(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    bob = await owner(sessions, "Bob", clock.now())
    await say(sessions, bob, ["Bob lives in Oslo"], clock.now())
    bob_fact = (await rows(sessions, bob))["Bob lives in Oslo"].id
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana lives in Lisbon", "Ana likes jazz"], clock.now())

    def answer(shown: dict[str, int]) -> dict[str, object]:
        if "Bob lives in Oslo" in shown:
            return {}
        lisbon = shown["Ana lives in Lisbon"]
        return {
            "replaced": [{"older": bob_fact, "newer": lisbon}],
            "same": [{"ids": [bob_fact, lisbon], "keep": lisbon}],
            "sections": [{"id": bob_fact, "section": "plan", "plan_date": "2020-01-01"}],
        }

    tidier = Tidier(answer)
    counts = await run_job("consolidate", job_context(settings, engine, sessions, clock, tidier.model()))

    assert (counts["consolidated"], counts["superseded"], counts["merged"], counts["retired"]) == (2, 0, 0, 0)
    oslo = (await rows(sessions, bob))["Bob lives in Oslo"]
    assert (oslo.invalidated_at, oslo.category, oslo.valid_until) == (None, None, None)
    assert await held(sessions, ana) == ["Ana lives in Lisbon", "Ana likes jazz"]
    ana_prompt = next(p for p in tidier.prompts if "Ana" in p)
    assert "Bob" not in ana_prompt


async def test_without_a_summary_model_duplicates_are_still_merged(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(
        sessions, ana, ["Ana plays the cello", "The user plays the cello.", "Ana plays cello"], clock.now()
    )
    await say(
        sessions,
        ana,
        ["Ana likes tea", "Ana doesn't like tea", "Ana has two cats", "Ana has three cats"],
        clock.now(),
    )
    await say(sessions, ana, ["Ana has a dentist appointment"], clock.now())
    async with sessions() as session, session.begin():
        facts = FactTidying(session)
        (dentist,) = [f for f in await facts.held(ana) if "dentist" in f.content]
        await facts.place(
            ana, dentist.id, clock.now(), category="plan", valid_until=clock.now() + timedelta(hours=1)
        )
    clock.advance(timedelta(days=1))
    no_key = unavailable_model(MissingModelKeyError("SUMMARY_MODEL needs ANTHROPIC_API_KEY"))

    counts = await run_job("consolidate", job_context(settings, engine, sessions, clock, no_key))

    assert (counts["consolidated"], counts["model_calls"], counts["merged"], counts["retired"]) == (
        1,
        0,
        2,
        1,
    )
    assert await held(sessions, ana) == [
        "Ana plays the cello",
        "Ana likes tea",
        "Ana doesn't like tea",
        "Ana has two cats",
        "Ana has three cats",
    ]
    facts = await rows(sessions, ana)
    assert facts["Ana plays the cello"].reinforced == 3
    assert facts["Ana has a dentist appointment"].invalid_reason == "the plan's date has passed"


async def test_a_groups_facts_about_two_members_stay_two(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    group, _ = await group_owner(sessions, chat_id=-100_777, title="Ana", now=clock.now(), timezone="UTC")
    await say(
        sessions, group.id, ["Ana plays the cello", "Ben plays the cello", "Ana plays cello."], clock.now()
    )
    tidier = Tidier()

    counts = await run_job("consolidate", job_context(settings, engine, sessions, clock, tidier.model()))

    # Ana's two wordings are one fact; Ben's is his own (a group's title is not a subject to drop).
    assert counts["merged"] == 1
    assert await held(sessions, group.id) == ["Ana plays the cello", "Ben plays the cello"]
    (prompt,) = tidier.prompts
    assert "Ben plays the cello" in prompt and tidier.instructions[0].startswith(GROUP_NOTE)


async def test_a_fact_the_person_changes_during_the_call_is_planned_again(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana lives in Lisbon", "Ana moved to Porto"], clock.now())
    lisbon = (await rows(sessions, ana))["Ana lives in Lisbon"].id
    prompts: list[str] = []

    async def person_edits_meanwhile(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
        prompts.append(prompt)
        shown = {w: int(i) for i, w in FACT_LINE.findall(prompt)}
        if len(prompts) == 1:  # the person rewords Lisbon in /memory while the model reads
            async with sessions() as session, session.begin():
                await FactRepository(session).reword(
                    ana, lisbon, "Ana lives in Lisbon and Porto", clock.now()
                )
            answer = {"replaced": [{"older": lisbon, "newer": shown["Ana moved to Porto"]}]}
        else:
            answer = {}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, answer)])

    ctx = job_context(settings, engine, sessions, clock, FunctionModel(person_edits_meanwhile))

    counts = await run_job("consolidate", ctx)

    # Nothing of the first plan was written; the owner was planned again on the new words.
    assert (counts["stale"], counts["consolidated"], counts["superseded"], counts["model_calls"]) == (
        1,
        1,
        0,
        2,
    )
    assert "Ana lives in Lisbon and Porto" in prompts[-1]
    assert await held(sessions, ana) == ["Ana lives in Lisbon and Porto", "Ana moved to Porto"]
    assert (await run_job("consolidate", ctx))["claimed"] == 0
