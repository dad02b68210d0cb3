"""The onboarding agent: a short conversation that learns a new user's name, place, interests and
boundaries before the main agent takes over. Its tools fill a working copy of the profile, which
the onboarding service stores with the answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.models import Model

from agent.account.timezones import Ambiguous, lookup_timezone
from agent.chat.persona import Persona, default_persona, with_name
from agent.core.usage import record_run
from agent.onboarding.context import OnboardingContext, OnboardingProfile, build_messages
from db.transient import is_transient

logger = logging.getLogger(__name__)


@dataclass
class OnboardingDeps:
    """The run's working copy of the profile; the tools fill it, the service stores it."""

    name: str | None
    timezone: str | None
    interests: list[str] = field(default_factory=list)
    boundaries: list[str] = field(default_factory=list)
    finished: bool = False

    @classmethod
    def start(cls, profile: OnboardingProfile) -> OnboardingDeps:
        """A working copy of what is stored."""
        return cls(profile.name, profile.timezone, list(profile.interests), list(profile.boundaries))


onboarding_agent: Agent[OnboardingDeps, str] = Agent(
    deps_type=OnboardingDeps, name="nikita-onboarding", defer_model_check=True, retries=2
)


@onboarding_agent.tool
async def set_name(ctx: RunContext[OnboardingDeps], name: str) -> str:
    """Save the name the person wants to be called."""
    cleaned = " ".join(name.split())[:100]
    if not cleaned:
        raise ModelRetry("the name is empty; pass the name the person gave")
    ctx.deps.name = cleaned
    return f"saved name: {cleaned}"


@onboarding_agent.tool
async def set_timezone(ctx: RunContext[OnboardingDeps], place_or_zone: str) -> str:
    """Save where the person is: a city (in the person's own words and language, with the country or
    state if they gave one), a country or an IANA time zone such as "Europe/Lisbon"."""
    zone = await lookup_timezone(place_or_zone)
    if zone is None:
        raise ModelRetry(
            f"{place_or_zone!r} is not a time zone or a city I know; try the nearest big city "
            "or an IANA name like Europe/Lisbon, or ask the person"
        )
    if isinstance(zone, Ambiguous):
        choices = "; ".join(choice.label for choice in zone.choices)
        return (
            f"not saved: there are several places called {zone.name} ({choices}). Ask the person which "
            "one they mean, then call set_timezone again with the city and its state or country"
        )
    ctx.deps.timezone = zone
    return f"saved time zone: {zone}"


@onboarding_agent.tool
async def add_interest(ctx: RunContext[OnboardingDeps], interest: str) -> str:
    """Save one interest or thing going on in the person's life."""
    cleaned = " ".join(interest.split())[:200]
    if cleaned and cleaned.lower() not in {i.lower() for i in ctx.deps.interests}:
        ctx.deps.interests.append(cleaned)
    return f"interests now: {', '.join(ctx.deps.interests)}"


@onboarding_agent.tool
async def add_boundary(ctx: RunContext[OnboardingDeps], boundary: str) -> str:
    """Save one boundary: a topic to avoid or how the person wants to be talked to."""
    cleaned = " ".join(boundary.split())[:200]
    if cleaned and cleaned.lower() not in {b.lower() for b in ctx.deps.boundaries}:
        ctx.deps.boundaries.append(cleaned)
    return f"boundaries now: {'; '.join(ctx.deps.boundaries)}"


# A barrier: the model often calls set_timezone and finish_onboarding in one response, and the
# look-up in set_timezone awaits, so run side by side the check here would not see its zone yet.
@onboarding_agent.tool(sequential=True)
async def finish_onboarding(ctx: RunContext[OnboardingDeps]) -> str:
    """Finish onboarding once the name and the place are known; the normal conversation starts next."""
    missing = [
        name for name, value in (("name", ctx.deps.name), ("timezone", ctx.deps.timezone)) if not value
    ]
    if missing:
        raise ModelRetry(f"not finished: still missing {', '.join(missing)}; ask the person for it first")
    ctx.deps.finished = True
    return "onboarding finished"


@dataclass(frozen=True)
class OnboardingRun:
    """The reply to one onboarding message and the profile it left behind."""

    text: str
    deps: OnboardingDeps
    failed: bool = False


FALLBACK_REPLY = (
    "Hi! I'm {persona_name}. Before we really start: what should I call you, and which city are you in "
    "(so I know your time of day)?"
)


async def run_onboarding(
    context: OnboardingContext, message: str, *, model: Model | str, persona: Persona | None = None
) -> OnboardingRun:
    """Run the onboarding agent on one message; a model failure gives a usable fallback question."""
    persona = persona or default_persona()
    deps = OnboardingDeps.start(context.profile)
    try:
        result = await onboarding_agent.run(
            None, message_history=build_messages(context, message, persona), deps=deps, model=model
        )
    except Exception as exc:
        # Any failure still gets an answer that is stored with the message; a database
        # that is briefly away is retried by the inbox instead.
        if is_transient(exc):
            raise
        extra = {"user_id": context.user_id}
        if isinstance(exc, AgentRunError | TimeoutError):
            logger.warning("onboarding model call failed", extra=extra, exc_info=exc)
        else:
            logger.exception("onboarding run failed", extra=extra)
        return OnboardingRun(_fallback(deps, persona), OnboardingDeps.start(context.profile), failed=True)
    record_run("onboarding", result.usage)
    text = result.output.replace("\x00", "").strip() or _fallback(deps, persona)
    return OnboardingRun(text, deps)


def _fallback(deps: OnboardingDeps, persona: Persona) -> str:
    if deps.name is None:
        return with_name(FALLBACK_REPLY, persona.name)
    if deps.timezone is None:
        return f"Sorry {deps.name}, I lost my train of thought. Which city are you in?"
    return "Sorry, I lost my train of thought for a second. Could you say that again?"
