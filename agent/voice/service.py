"""`VoiceService`: a call's three moments (initiate, server tools, call ended), Telegram- and HTTP-free.

bot/web/voice.py turns requests into these calls and their errors into HTTP answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.chat.persona import persona_for
from agent.core.clock import Clock
from agent.core.errors import VoiceAuthError, VoiceRequestError, VoiceUserNotFoundError
from agent.core.settings import Settings
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.call_turn import StoredCall
from agent.turn.service import TurnService
from agent.voice.auth import CallToken, CallTokens, verify_webhook, webhook_signature
from agent.voice.calls import SESSION_VARIABLE, TOKEN_VARIABLE, parse_post_call
from agent.voice.context import VoiceContext
from agent.voice.store import VoiceStore
from agent.voice.tools import VoiceTools
from db.models import User
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallEnded:
    """What became of a post-call webhook: stored (maybe again), or acknowledged and why not."""

    stored: StoredCall | None
    reason: str = ""


class VoiceService:
    """Starts calls, runs their server tools and stores them when they end."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        tokens: CallTokens,
        webhook_secret: str,
        context: VoiceContext,
        tools: VoiceTools,
        store: VoiceStore,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.clock = clock
        self.tokens = tokens
        self._webhook_secret = webhook_secret
        self.context = context
        self.tools = tools
        self.store = store

    async def _user(self, *, user_id: int | None = None, telegram_id: int | None = None) -> User:
        async with self.sessions() as session:
            users = UserRepository(session)
            if user_id is not None:
                user = await users.get(user_id)
            elif telegram_id is not None:
                user = await users.by_telegram_id(telegram_id)
            else:
                raise VoiceRequestError("bad_request", "give user_id or telegram_id")
        if user is None:
            raise VoiceUserNotFoundError("no such user")
        return user

    async def initiate(self, *, user_id: int | None = None, telegram_id: int | None = None) -> dict[str, Any]:
        """A session id, a signed token, the dynamic variables and the system prompt for a new call."""
        user = await self._user(user_id=user_id, telegram_id=telegram_id)
        now = self.clock.now()
        token = self.tokens.issue(user.id, now)
        call = await self.context.build(user, now)
        variables = {**call.dynamic_variables, SESSION_VARIABLE: token.token_id, TOKEN_VARIABLE: token.raw}
        snapshot = {**call.built.snapshot, "voice": {"session_id": token.token_id}}
        await self.store.record_prompt(user.id, call.prompt, snapshot, now)
        logger.info("voice call initiated", extra={"user_id": user.id, "session_id": token.token_id})
        return {
            "agent_id": self.settings.elevenlabs_agent_id,
            "user_id": user.id,
            "session_id": token.token_id,
            "signed_token": token.raw,
            "expires_at": self.tokens.expires_at(token).isoformat(),
            "dynamic_variables": variables,
            "system_prompt": call.prompt,
            # The shape ElevenLabs' clients take as `overrides` (the agent must allow prompt overrides).
            "conversation_config_override": {"agent": {"prompt": {"prompt": call.prompt}}},
        }

    def authenticate(self, raw_token: str | None) -> CallToken:
        """The claims of a valid, unexpired call token; anything else raises `VoiceAuthError`."""
        return self.tokens.verify(raw_token, self.clock.now())

    async def run_tool(self, token: CallToken, name: str, arguments: Mapping[str, object]) -> dict[str, Any]:
        """Run a server tool for the token's user (checked with `authenticate` first)."""
        now = self.clock.now()
        try:
            user = await self._user(user_id=token.user_id)
        except VoiceUserNotFoundError as exc:
            # Forgotten since the call began: the token opens nothing any more.
            raise VoiceAuthError("the call's user no longer exists") from exc
        result = await self.tools.run(name, user, arguments, now)
        logger.info("voice tool", extra={"user_id": user.id, "session_id": token.token_id, "tool": name})
        return result

    def _tolerance(self) -> timedelta:
        return timedelta(seconds=self.settings.elevenlabs_webhook_tolerance_seconds)

    def check_signature(self, signature: str | None) -> None:
        """Refuse (`VoiceAuthError`) a post-call webhook whose signature header is missing, malformed
        or stale, before its body is read; `call_ended` checks that it signs the body."""
        webhook_signature(signature, self.clock.now(), self._tolerance())

    async def call_ended(
        self, body: bytes, signature: str | None, *, parse: Callable[[bytes], object]
    ) -> CallEnded:
        """Store the call of a signed post-call webhook (once per call id).

        `parse` reads the body once the signature holds: the HTTP surface's bounded JSON parser,
        which raises ValueError for what it refuses.
        """
        now = self.clock.now()
        verify_webhook(body, signature, self._webhook_secret, now, self._tolerance())
        try:
            payload = parse(body)
        except ValueError as exc:
            raise VoiceRequestError("bad_payload", f"the body is not usable JSON: {exc}") from exc
        call = parse_post_call(payload, now)
        if call is None:
            return CallEnded(None, "not a transcription event")
        try:
            # The webhook's signature is the authentication here; the token only says whose call it
            # was, so its expiry is not checked (a call may outlast it, the webhook comes after).
            token = self.tokens.verify(call.token, now, check_expiry=False)
        except VoiceAuthError as exc:
            logger.warning(
                "voice call without a valid token", extra={"call_id": call.call_id, "error": str(exc)}
            )
            return CallEnded(None, f"no valid call token ({exc})")
        if not call.turns:
            return CallEnded(None, "nothing was said")
        stored = await self.store.store_call(token.user_id, call)
        if stored is None:
            return CallEnded(None, "the user's memory takes no writes")
        logger.info(
            "voice call ended",
            extra={
                "user_id": token.user_id,
                "session_id": token.token_id,
                "call_id": call.call_id,
                "conversation_id": stored.conversation_id,
                "duplicate": stored.duplicate,
            },
        )
        return CallEnded(stored)


def build_voice_service(
    settings: Settings,
    *,
    sessions: async_sessionmaker[AsyncSession],
    clock: Clock,
    turns: TurnService,
    recall: Recall,
    facts: Facts,
) -> VoiceService:
    """Wire the voice service from the runtime's parts; the secrets must be set (settings.require).

    A call's context is built by the turns' context builder over their cached histories, and a finished
    call is stored as one of their turns.
    """
    settings.require("voice_token_secret", "voice_initiate_secret", "elevenlabs_webhook_secret")
    assert settings.voice_token_secret is not None and settings.elevenlabs_webhook_secret is not None
    context = VoiceContext(
        sessions=sessions,
        builder=turns.context_builder,
        histories=turns.histories,
        facts=facts,
        conversation_timeout=timedelta(minutes=settings.conversation_timeout_minutes),
        persona=persona_for(settings),
    )
    store = VoiceStore(sessions=sessions, facts=facts, turns=turns)
    tools = VoiceTools(
        sessions=sessions,
        context=context,
        recall=recall,
        facts=facts,
        store=store,
        threads_limit=settings.context_threads_max,
    )
    return VoiceService(
        settings=settings,
        sessions=sessions,
        clock=clock,
        tokens=CallTokens(
            settings.voice_token_secret.get_secret_value(),
            ttl=timedelta(seconds=settings.voice_token_ttl_seconds),
        ),
        webhook_secret=settings.elevenlabs_webhook_secret.get_secret_value(),
        context=context,
        tools=tools,
        store=store,
    )
