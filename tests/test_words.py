"""One word per thing (docs/architecture.md, "Words"): the words the glossary retires appear nowhere
in the product's code (`bot`, `agent`, `db`, `jobs`: identifiers, strings and comments), except where
an explicit list below allows them: the old names a setting or a job is still read under, what is
stored under the old name (a column, a stored value), and the modules not renamed yet.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("bot", "agent", "db", "jobs")

# Each retired word: how it is found, and the word that replaces it (docs/architecture.md, "Words").
RETIRED: dict[str, tuple[str, str]] = {
    # "session" means a database session only; a talk between pauses is a conversation.
    "session for a conversation": (
        r"(?i:\bsession[ _-](?:history|closed by|compactions?|detection|timeout|boundar(?:y|ies)|aware)\b"
        r"|\bidle sessions?\b|\bsessions' worth\b|\bsessions of a user\b|\bhistory_cache_sessions\b"
        r"|\bsession_timeout_minutes\b|\ba user's sessions\b|\bowner's session\b)",
        "conversation",
    ),
    # The job that closes idle conversations has one name.
    "job sessions": (r"[\"']sessions[\"']", "close-idle-conversations"),
    "job _conversations": (r"\b_conversations\b", "close_idle_conversations"),
    "job close_idle": (r"\bclose_idle\b", "close_idle_conversations"),
    # "recall" is the transcript search; the facts found for a message are the facts tier.
    "recall for the facts tier": (
        r"\b(?:RecallSource|RecallLimits|RecallGroup|FunctionRecall|recall_block|recalled_line|context_recall_\w+"
        r"|(?i:recall tier|facts recalled|recalled (?:for|per) (?:a |this |each )?message))\b"
        r"|ContextBuilder\([^)]*\brecall=|\brecall: MessageFacts\b",
        "facts tier",
    ),
    # "memory" is everything the bot knows about a person or a group; the context is not "working
    # memory", the facts tier is not "the memory tier", the package is not "the session's memory".
    "memory for the context, a tier or the package": (
        r"(?i:\b(?:working memory|memory tier|memory package|session'?s memory|context_memory_\w+)\b)",
        "context / facts tier / package",
    ),
    # The instance holding a row's lease is its holder; "owner" is whose memory a row belongs to.
    "owner for a lease holder": (r"\b(?:lease_owner|new_owner|_OWNER)\b|\bself\.owner\b", "holder"),
    # A message the bot writes first is a touchpoint (a follow-up or a check-in).
    "proactive": (r"(?i:\bproactive\b)", "touchpoint"),
    "follow-ups for all touchpoints": (r"\bfollow_ups_sent\b|nikita\.follow_ups\b", "touchpoints"),
}

# Old names still accepted, and what is stored under the old name: allowed for good.
# (file, retired word): how many times it appears there.
ALIASES: dict[tuple[str, str], int] = {
    # Settings read under their old environment names (AliasChoices), each named in its comment too.
    ("agent/core/settings/context.py", "session for a conversation"): 2,
    ("agent/core/settings/context.py", "recall for the facts tier"): 2,
    ("agent/core/settings/context.py", "memory for the context, a tier or the package"): 4,
    ("agent/core/settings/general.py", "session for a conversation"): 2,
    # The job's old name, still typed by operators (`jobs run sessions`, `POST /tasks/sessions`).
    ("jobs/registry.py", "job sessions"): 1,
    # Stored values: the conversation and transcript kind, and the usage label, of a touchpoint.
    ("db/models/conversations.py", "proactive"): 2,
    ("db/models/usage.py", "proactive"): 1,
    ("db/repositories/conversations.py", "proactive"): 1,
    ("agent/core/usage.py", "proactive"): 1,
    ("agent/touchpoints/compose.py", "proactive"): 2,
    # Stored columns: the instance holding a row's lease (the attribute is `lease_holder`).
    ("db/models/delivery.py", "owner for a lease holder"): 1,
    ("db/models/prepared.py", "owner for a lease holder"): 1,
}

# Not yet renamed: a module whose rename waits for other work in flight, with its count (a rename
# that forgets this list fails). Empty: every retired word is renamed.
NOT_YET_RENAMED: dict[tuple[str, str], int] = {}


def _found() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    patterns = {word: re.compile(pattern) for word, (pattern, _) in RETIRED.items()}
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("db/migrations/"):
                continue  # each migration records the schema of its day
            text = path.read_text(encoding="utf-8")
            for word, pattern in patterns.items():
                if count := len(pattern.findall(text)):
                    found[relative, word] = count
    return found


def test_no_retired_word_in_the_product() -> None:
    found = _found()
    allowed = {**ALIASES, **NOT_YET_RENAMED}
    unexpected = sorted(
        f"{path}: {word!r} x{count} (say {RETIRED[word][1]!r})"
        for (path, word), count in found.items()
        if count != allowed.get((path, word), 0)
    )
    assert unexpected == [], "retired words (docs/architecture.md, Words):\n" + "\n".join(unexpected)
    stale = sorted(f"{path}: {word!r}" for (path, word) in allowed if (path, word) not in found)
    assert stale == [], "allowed but gone: drop from the lists\n" + "\n".join(stale)


def test_the_guard_sees_each_retired_word() -> None:
    # Every pattern finds the word it retires, so a typo in one cannot silence it.
    samples = {
        "session for a conversation": "closes idle sessions",
        "job sessions": 'run_job("sessions")',
        "job _conversations": "async def _conversations(ctx)",
        "job close_idle": "from jobs.conversations import close_idle",
        "recall for the facts tier": "the recall tier's budget",
        "memory for the context, a tier or the package": "Working memory: the tiers",
        "owner for a lease holder": "self.owner = owner or new_owner()",
        "proactive": "a proactive message",
        "follow-ups for all touchpoints": "instruments.follow_ups_sent.add(1)",
    }
    assert set(samples) == set(RETIRED)
    for word, sample in samples.items():
        assert re.search(RETIRED[word][0], sample), word
    # And not the words that stay: a database session, the transcript search, a fact's owner.
    for fine in (
        "async with sessions() as session",
        "a session closed after reads alone",
        "recall.search(user_id, query)",
        "async def _owner(session, owner_id)",
    ):
        assert not any(re.search(pattern, fine) for pattern, _ in RETIRED.values()), fine
