"""The chat agent's run for one turn, and what is stored of it whatever the run raised.

Whatever the run raises (the model, a tool, a bug), the exchange becomes a paired request and
apology, so the message is answered and the next turn's history stays valid. A database that is
briefly away is the exception: the inbox retries the whole update instead (db/transient.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic_ai.exceptions import AgentRunError, RunCancelled
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agent.chat import attachments as files
from agent.chat.agent import chat_agent
from agent.chat.deps import TurnDeps
from agent.chat.streaming import TurnProgress, can_stream, event_handler
from agent.core.usage import record_run
from agent.history.turn_notes import with_note
from agent.turn.stopped import STOPPED_EMPTY, stopped_exchange
from db.transient import is_transient
from db.uninterrupted import collect_abandoned_connections

logger = logging.getLogger(__name__)

APOLOGY = (
    "Sorry, I couldn't think straight just now (my language model didn't answer). "
    "Your message is saved; please try again in a moment."
)
FAULT_APOLOGY = (
    "Sorry, something went wrong on my side while I was thinking about that. "
    "Your message is saved; please try again in a moment."
)


@dataclass(frozen=True)
class Outcome:
    """What a run leaves to store: the answer, the new messages and how the user's message reads."""

    answer: str
    new_messages: list[ModelMessage]
    # How the transcript shows the user's message (with files: the model's description of them).
    text: str
    failed: bool = False
    stopped: bool = False  # the person pressed stop: `answer` is what was written until then


async def run_chat(
    deps: TurnDeps,
    text: str,
    *,
    history: list[ModelMessage] | None,
    model: Model | str,
    model_settings: ModelSettings,
    sent_at: datetime,
    attachments: Sequence[files.Attachment] = (),
    progress: TurnProgress | None = None,
) -> Outcome:
    """Run the chat agent on the user's message; a failure becomes an apology (never a raise,
    except a transient database error)."""
    try:
        result = await chat_agent.run(
            # This turn's note first, then the message: both stay with the turn in the history.
            with_note(deps.note, files.prompt(text, attachments) if attachments else text),
            message_history=history,
            deps=deps,
            model=model,
            # A literal instruction: sorted first and cached for every user of the bot.
            instructions=deps.persona,
            model_settings=model_settings,
            event_stream_handler=(
                event_handler(progress, files.visible) if progress is not None and can_stream(model) else None
            ),
            cancellation_token=progress.cancellation if progress is not None else None,
        )
        record_run("chat", result.usage)
        answer = result.output.replace("\x00", "")
        if not attachments:
            return Outcome(answer, result.new_messages(), text)
        description, answer = files.split_description(answer)
        remembered = files.remembered(text, description)
        return Outcome(answer, files.without_files(result.new_messages(), remembered), remembered)
    except RunCancelled as exc:
        return _stopped(exc, deps, text, sent_at, attachments)
    except Exception as exc:
        if is_transient(exc):
            raise
        return _apology(exc, deps, text, sent_at)


def _stopped(
    exc: RunCancelled, deps: TurnDeps, text: str, sent_at: datetime, attachments: Sequence[files.Attachment]
) -> Outcome:
    # No apology: the person chose this. The partial run's requests and tokens still count.
    logger.info("answer stopped", extra={"user_id": deps.user_id, "conversation_id": deps.conversation_id})
    record_run("chat", exc.usage)
    # A tool cut off inside a SQLite write leaves its connection holding the write lock until it
    # is collected (db/uninterrupted.py): collected now, before the turn stores its answer.
    collect_abandoned_connections()
    written, messages = stopped_exchange(exc.new_messages(), with_note(deps.note, text), sent_at)
    if attachments:
        written, messages = files.visible(written).strip(), files.without_files(messages, text)
    return Outcome(written or STOPPED_EMPTY, messages, text, stopped=True)


def _apology(exc: Exception, deps: TurnDeps, text: str, sent_at: datetime) -> Outcome:
    model_side = isinstance(exc, AgentRunError | TimeoutError)
    extra = {"user_id": deps.user_id, "conversation_id": deps.conversation_id}
    if model_side:
        logger.warning("model call failed", extra=extra, exc_info=exc)
    else:
        logger.exception("agent run failed", extra=extra)
    answer = APOLOGY if model_side else FAULT_APOLOGY
    # A request always followed by its response: the next turn's history stays valid.
    pair: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(with_note(deps.note, text), timestamp=sent_at)]),
        ModelResponse(parts=[TextPart(answer)], timestamp=sent_at),
    ]
    return Outcome(answer, pair, text, failed=True)
