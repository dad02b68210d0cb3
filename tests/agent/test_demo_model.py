"""The offline demo model writes readable memory from the conversation itself, through the real agents."""

from __future__ import annotations

from datetime import UTC, date, datetime

from agent.core.demo import LABEL, briefing, demo_model
from agent.core.settings import Settings
from agent.digest.extraction import extract
from agent.digest.summaries import Line, summarise_day
from agent.memory.profile import ProfileFact

SETTINGS = Settings(_env_file=None, model="demo", summary_model="demo")


def line(number: int, role: str, text: str) -> Line:
    return Line(number, role, text, datetime(2026, 11, 26, 9, number, tzinfo=UTC))


CONVERSATION = [
    line(1, "user", "Hi! I am a nurse in Lyon. My sister is called Ana."),
    line(2, "assistant", "Nice to meet you."),
    line(3, "user", "I have an interview on Friday. Should I wear the blue suit?"),
]


async def test_extraction_finds_facts_plans_and_questions_with_their_messages() -> None:
    ended = "Thursday 2026-11-26 10:03 (Europe/Paris)"
    result = await extract(demo_model(), SETTINGS, CONVERSATION, [], ended_local=ended)
    assert [(f.text, f.message_ids, f.category, f.valid_until) for f in result.user_facts] == [
        ("The user is a nurse in Lyon.", [1], None, None),  # the memory places these by their words
        ("The user's sister is called Ana.", [1], None, None),
        ("The user has an interview on Friday.", [3], "plan", "2026-11-27"),
    ]
    threads = [(t.type, t.content, t.follow_up_at) for t in result.threads_to_open]
    assert threads == [
        ("follow_up", "Their plan: I have an interview on Friday.", "2026-11-27 20:00"),
        ("question", "They asked: Should I wear the blue suit?", None),
    ]
    assert result.summary.startswith(f"{LABEL} They said: Hi! I am a nurse in Lyon.")
    assert "Nice to meet you" not in result.summary  # what the user said, not the companion


async def test_extraction_keeps_preferences_instructions_and_decisions_with_their_messages() -> None:
    said = [
        line(1, "user", "I prefer short answers. Always format code with syntax highlighting."),
        line(2, "assistant", "Always, I promise. I'd rather be brief too."),
        line(3, "user", "I decided to use SQLite. I'd like a dark theme. Never use emojis!"),
    ]
    result = await extract(demo_model(), SETTINGS, said, [], ended_local="Thursday 2026-11-26 10:03 (UTC)")
    assert [(f.text, f.message_ids) for f in result.user_facts] == [
        ("The user prefers short answers.", [1]),
        ("The user asked: Always format code with syntax highlighting.", [1]),
        ("The user decided to use SQLite.", [3]),
        ("The user would like a dark theme.", [3]),
        ("The user asked: Never use emojis.", [3]),
    ]  # the companion's own lines teach nothing about the person


async def test_a_day_summary_keeps_the_previous_one_and_adds_the_new_messages() -> None:
    day = date(2026, 11, 26)
    first = await summarise_day(demo_model(), SETTINGS, day=day, previous=None, lines=CONVERSATION)
    later = [line(30, "user", "I decided to go for a run tomorrow.")]
    second = await summarise_day(demo_model(), SETTINGS, day=day, previous=first.markdown(), lines=later)
    assert second.summary.startswith(f"{LABEL} Hi! I am a nurse in Lyon.")
    assert second.summary.endswith("I decided to go for a run tomorrow.")
    assert second.open_loops == ["Should I wear the blue suit?"]
    assert second.decisions == ["I decided to go for a run tomorrow."]
    assert second.next_steps == ["I have an interview on Friday.", "I decided to go for a run tomorrow."]


async def test_a_briefing_is_written_from_the_package_and_validates() -> None:
    from agent.context.briefing.writer import BriefingDraft
    from agent.context.tiers import TierBlock

    today = TierBlock("today", "Earlier today:", ("They said they are a nurse in Lyon.",)).render()
    threads = TierBlock("threads", "Unfinished topics:", ("(question, today) Blue suit or grey?",)).render()
    draft = BriefingDraft.model_validate(briefing(f"Their local day: Thursday.\n\n{today}\n\n{threads}"))
    assert draft.today == "They said they are a nurse in Lyon."
    assert draft.follow_up == ["(question, today) Blue suit or grey?"]
    assert draft.who.startswith(LABEL)


async def test_the_demo_extraction_decides_against_known_facts_and_names_group_members() -> None:
    known = [
        ProfileFact(4, "The user lives in Lisbon.", None, False),
        ProfileFact(5, "The user is a nurse.", None, False),
    ]
    said = [
        line(1, "user", "I moved to Porto. I am a nurse."),
        line(2, "assistant", "I am sure you have a cat."),  # the companion's words are not theirs
    ]
    result = await extract(demo_model(), SETTINGS, said, [], known=known)
    assert [(f.text, f.relation, f.known_id) for f in result.user_facts] == [
        ("The user moved to Porto.", "update", 4),
        ("The user is a nurse.", "same", 5),
    ]

    group = [Line(7, "user", "I have a dog.", datetime(2026, 11, 26, 9, 7, tzinfo=UTC), "Ben", 12)]
    members = await extract(demo_model(), SETTINGS, group, [], group=True)
    assert [(f.text, f.message_ids) for f in members.user_facts] == [("Ben has a dog.", [7])]
