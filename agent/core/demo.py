"""The offline `demo` model: plain chat answers and readable memory, written from the conversation.

It needs no key and no network, and every answer is deterministic, so a newcomer can watch the
memory work in the terminal chat: post-processing, day summaries and briefings get an extractive
summary of what the user said, facts from "I am / I have / my X is" sentences, and threads from
their questions and plans; the chat answer mentions what the context holds and searches past
conversations when asked to remember. Everything it writes is labelled as offline.

It answers every agent by the shape of its request: an output tool (extraction, day summary,
briefing, touchpoint composition, consolidation: agent/core/demo_tidy.py) gets a tool call built
from that tool's fields, a request with the recall tools gets a chat answer, any other request
(history compaction) a plain summary.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.demo_tidy import claim, tidy
from db.repositories.dedupe import normalise_fact

MODEL_NAME = "demo"
SEARCH_TOOL = "conversation_search"
LABEL = "(offline demo)"
# A transcript line as the summary and extraction prompts show it: `[#12 09:30 user] text`.
_LINE = re.compile(r"^\[#(\d+) \d\d:\d\d (\w+)\] (.*)$", re.MULTILINE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
# What the person says of themselves, and what they want kept: preferences, instructions, decisions.
_FACT = re.compile(
    r"^(i am|i'm|i have|i've got|i've|i live|i moved|i work|my \w+(?: \w+)? (?:is|are)"
    r"|i (?:really )?(?:prefer|like|love|hate|want|decided|chose)|i'd (?:prefer|rather|like)"
    r"|i don't (?:like|want)|(?:please )?(?:always|never)|from now on)\b",
    re.I,
)
_PLAN = re.compile(
    r"\b(tomorrow|tonight|next week|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|i will|i'll|i'm going to|i am going to|i plan|my \w+ is on)\b",
    re.I,
)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Text the bot wraps in one tag (the turn's note, a document's text) is not what the person said.
_WRAPPED = re.compile(r"\A<(\w+)\b[^>]*>.*</\1>\s*\Z", re.S)
_ENDED = re.compile(r"ended on \w+ (\d{4}-\d\d-\d\d)")
# A known fact as the extraction prompt lists it: `- [fact 12] The user lives in Lisbon.`
_KNOWN = re.compile(r"^- \[fact (\d+)\] (.*)$", re.MULTILINE)
# A group member's line: `Ana: I am a nurse.`
_MEMBER = re.compile(r"^([^\W\d_][^:\n]{0,60}): (.+)$")
_RECALL = re.compile(r"\b(remember|what did i|did i (?:tell|say|mention))\b", re.I)
_STOPWORDS = frozenset(
    "a an the i you me my your we do did does what when where who how about tell told say said "
    "remember mention mentioned to of in on at is are was were it that this and or".split()
)
_PRONOUNS = (
    (re.compile(r"^i am\b", re.I), "The user is"),
    (re.compile(r"^i'm\b", re.I), "The user is"),
    (re.compile(r"^i have\b|^i've got\b|^i've\b", re.I), "The user has"),
    (re.compile(r"^i live\b", re.I), "The user lives"),
    (re.compile(r"^i moved\b", re.I), "The user moved"),
    (re.compile(r"^i work\b", re.I), "The user works"),
    (re.compile(r"^my\b", re.I), "The user's"),
    (re.compile(r"^i (?:really )?(prefer|like|love|hate|want)\b", re.I), r"The user \1s"),
    (re.compile(r"^i (decided|chose)\b", re.I), r"The user \1"),
    (re.compile(r"^i'd (prefer|rather|like)\b", re.I), r"The user would \1"),
    (re.compile(r"^i don't (like|want)\b", re.I), r"The user doesn't \1"),
    (re.compile(r"^(?:please )?(always|never|from now on)\b", re.I), r"The user asked: \1"),
)


def demo_model() -> FunctionModel:
    """The offline demo model (`MODEL=demo`, `SUMMARY_MODEL=demo`)."""
    return FunctionModel(_answer, model_name=MODEL_NAME)


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = _last_prompt(messages)
    if info.output_tools:
        tool = info.output_tools[0]
        fields = set(tool.parameters_json_schema.get("properties", {}))
        return ModelResponse(parts=[ToolCallPart(tool.name, _structured(fields, prompt, messages))])
    if info.function_tools:
        return _chat(messages, prompt, can_search=any(t.name == SEARCH_TOOL for t in info.function_tools))
    return ModelResponse(parts=[TextPart(f"{LABEL} {_extractive(_lines(prompt, role=None) or [prompt])}")])


def _structured(fields: set[str], prompt: str, messages: list[ModelMessage]) -> dict[str, Any]:
    if "user_facts" in fields:
        return extraction(prompt, group="group chat" in _instructions(messages))
    if "goals" in fields:
        return day_summary(prompt)
    if "who" in fields:
        return briefing(prompt)
    if "send" in fields:  # a touchpoint: the offline model never writes first
        return {"send": False, "text": ""}
    if "replaced" in fields:
        return tidy(prompt)
    return {name: f"{LABEL} {_shorten(prompt, 200)}" for name in fields}


def extraction(prompt: str, *, group: bool = False) -> dict[str, Any]:
    """Facts (each decided against the known facts in the prompt), threads and a summary of the
    conversation in an extraction prompt; in a group, each member's facts under their name."""
    said = _user_lines(prompt)
    ended = _ENDED.search(prompt)
    day = date.fromisoformat(ended.group(1)) if ended else None
    known = [(int(m.group(1)), m.group(2)) for m in _KNOWN.finditer(prompt)]
    facts = [
        _decided(_fact(fact, line_id, day), known)
        for line_id, text in said
        for fact in _member_facts(text, group=group)
    ]
    threads: list[dict[str, Any]] = []
    for _, text in said:
        for sentence in _sentences(text):
            if sentence.endswith("?") and not _RECALL.search(sentence):
                threads.append({"type": "question", "content": f"They asked: {sentence}"})
            elif _PLAN.search(sentence):
                threads.append(
                    {
                        "type": "follow_up",
                        "content": f"Their plan: {sentence}",
                        "follow_up_at": _when(sentence, day),
                    }
                )
    texts = [text for _, text in said]
    return {
        "user_facts": facts,
        "threads_to_open": threads[:5],
        "key_moments": [f["text"] for f in facts][:3],
        "summary": f"{LABEL} They said: {_extractive(texts)}" if texts else f"{LABEL} They said nothing.",
        "tone": "neutral",
    }


def day_summary(prompt: str) -> dict[str, Any]:
    """The previous day summary, kept, with what the new messages add."""
    previous = prompt.split("Previous summary:\n", 1)[-1].split("\n\nNew messages:", 1)[0]
    sections = _sections(previous)
    texts = [text for _, text in _user_lines(prompt.split("New messages:\n", 1)[-1])]
    narrative = " ".join(
        s for s in (sections.get("Summary", [""])[0], _extractive(texts) if texts else "") if s
    )
    narrative = _shorten(narrative, 600)
    if not narrative.startswith(LABEL):
        narrative = f"{LABEL} {narrative}".strip()
    sentences = [s for t in texts for s in _sentences(t)]
    plans = [s for s in sentences if _PLAN.search(s)]
    return {
        "summary": narrative,
        "goals": _merge(
            sections.get("Goals"), [s for s in sentences if re.search(r"\bi (?:want|need|hope)", s, re.I)]
        ),
        "decisions": _merge(
            sections.get("Decisions"), [s for s in sentences if re.search(r"\bi decided\b", s, re.I)]
        ),
        "open_loops": _merge(sections.get("Open loops"), [s for s in sentences if s.endswith("?")]),
        "next_steps": _merge(sections.get("Next steps"), plans),
        "key_moments": [fact for t in texts for fact in _facts(t)][:5],
    }


def briefing(prompt: str) -> dict[str, Any]:
    """A briefing made of the package's own lines."""
    today = _tag_items(prompt, "earlier_today")
    topics = _tag_items(prompt, "unfinished_topics")
    about = _tag_items(prompt, "about_them")
    who = _shorten(" ".join(about), 200) or "Someone chatting with the offline demo."
    now = _shorten(" ".join(today), 300) or "Nothing yet today."
    return {
        "who": f"{LABEL} {who}",
        "today": now,
        "approach": "Plainly and briefly.",
        "follow_up": [topic.lstrip("- ") for topic in topics[:5]],
        "left_out": [],
        "voice": f"{who} {now}",
    }


def _chat(messages: list[ModelMessage], prompt: str, *, can_search: bool) -> ModelResponse:
    last = messages[-1] if messages else None
    returned = [p for p in getattr(last, "parts", ()) if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(_found(returned[0].content))])
    if can_search and _RECALL.search(prompt):
        words = [w for w in re.findall(r"[\w']+", prompt.lower()) if w not in _STOPWORDS]
        query = " ".join(words) or prompt
        return ModelResponse(parts=[ToolCallPart(SEARCH_TOOL, {"query": query})])
    answer = f"{LABEL} Noted: {_shorten(prompt, 120)!r}."
    first_of_conversation = not any(isinstance(m, ModelResponse) for m in messages)
    context = _instructions(messages)
    if first_of_conversation:
        # The tiers (v1), or the briefing written from them (v2), then the profile's first fact.
        briefing = _tag_items(context, "your_briefing")
        today = _tag_items(context, "earlier_today") or [
            line.split(": ", 1)[1] for line in briefing if line.startswith("What matters today: ")
        ]
        if today:
            answer += f" Earlier today: {_shorten(today[0].lstrip('- '), 160)}"
        follow_ups = briefing[briefing.index("To follow up:") + 1 :] if "To follow up:" in briefing else []
        topics = _tag_items(context, "unfinished_topics") or follow_ups
        if topics:
            answer += f" Still open: {_shorten(topics[0].lstrip('- '), 120)}"
        known = [line[2:] for line in _tag_items(context, "about_them") if line.startswith("- ")]
        if known:
            answer += f" I remember: {_shorten(known[0], 120)}"
    return ModelResponse(parts=[TextPart(answer)])


def _found(content: object) -> str:
    results = content.get("results") if isinstance(content, dict) else None
    if not results:
        return f"{LABEL} I searched our past conversations and found nothing about that."
    best = results[0]
    text = str(best.get("snippet") or best.get("summary_snippet") or "")
    # A day summary's snippet is Markdown: its headings and empty sections say nothing here.
    text = re.sub(r"#+ (?:Summary|Goals|Decisions|Open loops|Next steps)\b|- none", " ", text)
    when = best.get("when") or best.get("day_label") or "before"
    return f"{LABEL} I found this ({when}): {_shorten(text, 200)}"


def _fact(text: str, line_id: int, day: date | None) -> dict[str, Any]:
    """One extracted fact, and a plan's day when the sentence names one; other facts are written without
    a category, and the memory places them by their words as it does any such fact."""
    fact: dict[str, Any] = {"text": text, "message_ids": [line_id]}
    if _PLAN.search(text) and (when := _when(text, day)) is not None:
        fact["category"], fact["valid_until"] = "plan", when[:10]
    return fact


def _member_facts(text: str, *, group: bool) -> list[str]:
    """The facts of a line; a group member's ("Ana: I am a nurse.") under their name."""
    member = _MEMBER.match(text) if group else None
    if member is None:
        return _facts(text)
    name = member.group(1).strip()
    return [
        f.replace("The user's", f"{name}'s", 1).replace("The user", name, 1) for f in _facts(member.group(2))
    ]


def _decided(fact: dict[str, Any], known: list[tuple[int, str]]) -> dict[str, Any]:
    """The fact with its relation to the known facts: the same words, or where they live or work
    again (the same place: the same fact; another: an update)."""
    said = claim(fact["text"])
    for known_id, text in known:
        if normalise_fact(text) == normalise_fact(fact["text"]):
            return fact | {"relation": "same", "known_id": known_id}
        earlier = claim(text)
        if said is not None and earlier is not None and earlier[0] == said[0]:
            relation = "same" if earlier[1] == said[1] else "update"
            return fact | {"relation": relation, "known_id": known_id}
    return fact


def _facts(text: str) -> list[str]:
    found = []
    for sentence in _sentences(text):
        if _FACT.match(sentence):
            for pattern, replacement in _PRONOUNS:
                if pattern.match(sentence):
                    found.append(pattern.sub(replacement, sentence, count=1).rstrip(".!") + ".")
                    break
    return found


def _when(sentence: str, day: date | None) -> str | None:
    """The evening of the day a plan names, as local `YYYY-MM-DD HH:MM` (None when it names none)."""
    if day is None:
        return None
    lowered = sentence.lower()
    if "tomorrow" in lowered:
        target = day + timedelta(days=1)
    elif "next week" in lowered:
        target = day + timedelta(days=7)
    elif "tonight" in lowered:
        target = day
    else:
        named = next((i for i, name in enumerate(_WEEKDAYS) if name in lowered), None)
        if named is None:
            return None
        target = day + timedelta(days=(named - day.weekday()) % 7 or 7)
    return f"{target.isoformat()} 20:00"


def _last_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart) and (said := _said(part)):
                return said
    return ""


def _said(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n\n".join(item for item in part.content if isinstance(item, str) and not _WRAPPED.match(item))


def _instructions(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions:
            return message.instructions
    return ""


def _lines(prompt: str, *, role: str | None) -> list[str]:
    return [m.group(3) for m in _LINE.finditer(prompt) if role is None or m.group(2) == role]


def _user_lines(prompt: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(3)) for m in _LINE.finditer(prompt) if m.group(2) == "user"]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if len(s.strip()) > 2]


def _extractive(texts: list[str]) -> str:
    """The first sentences of what was said, about 300 characters."""
    return _shorten(" ".join(s for t in texts for s in _sentences(t)), 300)


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"


def _tag_items(text: str, tag: str) -> list[str]:
    """The lines inside `<tag>`, without the heading line, Markdown escapes and empty sections."""
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    if match is None:
        return []
    lines = match.group(1).splitlines()[1:]
    return [
        line.strip()
        for line in lines
        if line.strip() and not line.startswith("\\#") and line.strip() != "- none"
    ]


def _sections(markdown: str) -> dict[str, list[str]]:
    """A stored day summary's sections: the narrative, and each section's items."""
    sections: dict[str, list[str]] = {}
    for block in re.split(r"^## ", markdown, flags=re.M):
        title, _, body = block.partition("\n")
        if title.strip() == "Summary":
            sections["Summary"] = [" ".join(body.split())]
        elif title.strip():
            sections[title.strip()] = [
                ln[2:].strip() for ln in body.splitlines() if ln.startswith("- ") and ln != "- none"
            ]
    return sections


def _merge(kept: list[str] | None, new: list[str]) -> list[str]:
    merged = list(kept or [])
    merged += [item for item in new if item not in merged]
    return merged[-5:]
