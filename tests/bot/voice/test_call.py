"""Whole calls: the fake ElevenLabs agent starts a call, uses the memory, hangs up, and the next
Telegram message finds the call (today's summary, conversation search, saved facts, the graph)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent.graph import open_graph
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import Conversation, TranscriptMessage, UserFact
from jobs.registry import run_job
from tests.agent.graph.conftest import HAVE_FALKORDBLITE, IN_CI

from .conftest import OpenApp, VoiceApp, app_clock

ALICE = 501


async def morning_chat(app: VoiceApp) -> int:
    """Alice texts, the session ends and is post-processed: a day summary and an open thread exist."""
    # Not "Will my sister...": the scripted graph model would make "Will" an entity, and a name made
    # only of RediSearch stopwords crashes embedded FalkorDB (an upstream graphiti bug).
    await app.text(ALICE, "My sister Marta is a doctor")
    await app.text(ALICE, "Does my sister Marta visit in June?")
    app.later(minutes=20)
    await run_job("close-idle-conversations", app.runtime.jobs)
    counts = await run_job("postprocess", app.runtime.jobs)
    assert (counts["processed"], counts["failed"]) == (1, 0)
    async with app.runtime.sessions() as session:
        user_id = await session.scalar(select(Conversation.user_id))
    assert user_id is not None
    return user_id


async def whole_call(app: VoiceApp, user_id: int) -> dict[str, Any]:
    """One call from start to hang-up; returns what each step answered."""
    call = await app.agent.start(telegram_id=ALICE)
    call.say("agent", "Hey Alice, how are you?", after=1)
    call.say("user", "I am moving to Porto in May")
    context = await call.tool("get_context")
    memory = await call.tool("get_memory", query="Marta sister", limit=5)
    call.say("agent", "Porto! Big news. And Marta is coming in June, right?")
    saved = await call.tool("update_memory", fact="Alice is moving to Porto in May", category="plans")
    call.say("user", "Yes, and remember that Marta is a nurse")
    call.say("agent", "I will. Talk soon!")
    ended = await call.end()
    return {"call": call, "context": context, "memory": memory, "saved": saved, "ended": ended}


def assert_call_answers(steps: dict[str, Any], user_id: int) -> None:
    call = steps["call"]
    start = call.initiation
    variables = start["dynamic_variables"]
    assert start["ok"] and start["user_id"] == user_id and start["agent_id"] == "agent_fake_nikita"
    assert variables["user_name"] == "Alice"
    assert variables["persona_name"] == "Nikita" and "You are Nikita, a warm" in start["system_prompt"]
    assert variables["time_since_last_contact"] == "20 minutes ago"
    assert "Marta" in variables["today_summary"]
    assert "Does my sister Marta visit in June?" in variables["open_threads"]
    assert variables["secret__nikita_token"] == start["signed_token"]
    assert variables["nikita_session_id"] == start["session_id"]
    prompt = start["system_prompt"]
    # The voice persona over the same tiers a text turn gets.
    assert "on a voice call" in prompt and "Earlier today:" in prompt and "Unfinished topics:" in prompt
    assert start["conversation_config_override"]["agent"]["prompt"]["prompt"] == prompt

    context = steps["context"]
    assert context.status_code == 200, context.text
    package = context.json()["result"]
    assert package["user"]["name"] == "Alice"
    assert any("Marta" in line for line in package["open_threads"])
    assert package["memory"]["limits"] == {"user": 50, "relationship": 30, "persona": 20}
    groups = package["memory"]
    # Saved facts without the graph, the graph's user facts and shared episodes with it.
    assert any(
        "Marta is a doctor" in f["text"] for f in groups["user_facts"] + groups["relationship_episodes"]
    )

    memory = steps["memory"].json()
    assert steps["memory"].status_code == 200 and memory["ok"] and memory["tool"] == "get_memory"
    found = memory["result"]
    # Summary hits (the day's summary) and message hits (the exact words) alike.
    assert any("Marta" in (hit.get("snippet") or hit["summary_snippet"]) for hit in found["conversations"])
    assert any("Marta" in thread for thread in found["threads"])

    saved = steps["saved"]
    assert saved.status_code == 200
    assert saved.json()["result"] == {
        "stored": True,
        "fact": "Alice is moving to Porto in May",
        "category": "plans",
        "already_known": False,
    }
    ended = steps["ended"]
    assert ended.status_code == 200, ended.text
    assert ended.json()["stored"] and not ended.json()["duplicate"] and ended.json()["messages"] == 5


async def assert_next_text_sees_the_call(app: VoiceApp, user_id: int, steps: dict[str, Any]) -> None:
    conversation_id = steps["ended"].json()["conversation_id"]
    async with app.runtime.sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        assert conversation is not None
        # Post-processed right after the webhook was answered.
        assert (conversation.kind, conversation.status) == ("voice", "processed")
        assert conversation.summary is not None and "Porto" in conversation.summary
        spoken = (
            await session.execute(
                select(TranscriptMessage.role, TranscriptMessage.content)
                .where(
                    TranscriptMessage.conversation_id == conversation_id, TranscriptMessage.kind == "voice"
                )
                .order_by(TranscriptMessage.sent_at, TranscriptMessage.id)
            )
        ).all()
        facts = (await session.execute(select(UserFact.content, UserFact.source, UserFact.category))).all()
    assert [tuple(row) for row in spoken] == [
        ("assistant", "Hey Alice, how are you?"),
        ("user", "I am moving to Porto in May"),
        ("assistant", "Porto! Big news. And Marta is coming in June, right?"),
        ("user", "Yes, and remember that Marta is a nurse"),
        ("assistant", "I will. Talk soon!"),
    ]
    assert ("Alice is moving to Porto in May", "voice", "plans") in [tuple(f) for f in facts]

    app.later(minutes=3)
    app.chat.plans.append(
        [("conversation_search", {"query": "Porto"}), ("memory_search", {"query": "Porto"})]
    )
    reply = await app.text(ALICE, "What did I tell you on the phone?")
    assert reply == "I remember."
    instructions = app.chat.instructions[-1]
    today = instructions.split("Earlier today:", 1)[1]
    assert "I am moving to Porto in May" in today  # the call is in today's summary
    hits = app.chat.tool_returns["conversation_search"]["results"]
    assert any(h.get("snippet", "").startswith("I am moving to Porto") and h["role"] == "user" for h in hits)
    facts_found = [f["content"] for f in app.chat.tool_returns["memory_search"]["facts"]]
    assert "Alice is moving to Porto in May" in facts_found


async def test_a_whole_call_lands_in_the_memory_the_next_message_reads(open_app: OpenApp) -> None:
    app = await open_app()
    user_id = await morning_chat(app)
    steps = await whole_call(app, user_id)
    assert_call_answers(steps, user_id)
    await assert_next_text_sees_the_call(app, user_id, steps)
    # ElevenLabs retries a webhook it thinks failed: the call is stored once.
    again = await app.agent.deliver(steps["call"].transcription())
    assert again.status_code == 200 and again.json()["duplicate"] is True
    async with app.runtime.sessions() as session:
        calls = (await session.execute(select(Conversation.id).where(Conversation.kind == "voice"))).all()
    assert len(calls) == 1


@pytest.mark.process
async def test_a_whole_call_with_the_knowledge_graph(open_app: OpenApp, tmp_path: Path) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed (CI always installs it and runs this test)")
    clock = app_clock()
    graph = await open_graph(
        "falkordblite",
        url=None,
        path=str(tmp_path / "graph.db"),
        llm_client=ScriptedLLMClient(),
        embedder=HashingEmbedder(),
        clock=clock,
    )
    app = await open_app(graph=graph, clock=clock)
    user_id = await morning_chat(app)
    steps = await whole_call(app, user_id)
    assert_call_answers(steps, user_id)
    # get_context's user facts came from the graph: the morning's post-processed episode.
    groups = steps["context"].json()["result"]["memory"]
    assert any("Marta" in f["text"] for f in groups["user_facts"] + groups["relationship_episodes"])
    await run_job("graph", app.runtime.jobs)  # the graph follows the list through its job
    await assert_next_text_sees_the_call(app, user_id, steps)
    exported = await app.runtime.graph.export_user(user_id)
    episodes = [e["content"] for e in exported["groups"]["user"]["episodes"]]
    assert "Alice is moving to Porto in May" in episodes  # update_memory reached the graph
    assert any("Porto" in e for e in episodes if e != "Alice is moving to Porto in May")  # and the call did
    # The call's fact is in the profile, read from the one list; the graph's copy is not repeated.
    about = app.chat.instructions[-1].split("<about_them>", 1)[1].split("</about_them>", 1)[0]
    assert "- Alice is moving to Porto in May" in about


async def test_a_call_picks_up_the_text_chat_it_interrupts_and_ends_it(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "I'll call you in a minute about the Porto flat")
    app.later(minutes=1)
    call = await app.agent.start(telegram_id=ALICE)
    recent = call.initiation["system_prompt"].split("## Just before this call, by text", 1)[1]
    assert "Person: I'll call you in a minute about the Porto flat\nNikita: ok" in recent
    context = (await call.tool("get_context")).json()["result"]
    assert context["recent_text_messages"] == [
        "Person: I'll call you in a minute about the Porto flat",
        "Nikita: ok",
    ]
    call.say("user", "So, the flat has a balcony")
    assert (await call.end()).json()["stored"] is True
    app.later(minutes=2)
    await app.text(ALICE, "Back to texting")
    async with app.runtime.sessions() as session:
        rows = (
            await session.execute(select(Conversation.kind, Conversation.status).order_by(Conversation.id))
        ).all()
    # The text conversation the call interrupted was closed (and post-processed with the call); a new one
    # began.
    assert [tuple(r) for r in rows] == [("text", "processed"), ("voice", "processed"), ("text", "active")]
    assert "Earlier today:" in app.chat.instructions[-1] and "balcony" in app.chat.instructions[-1]
